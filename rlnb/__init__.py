"""rlnb: step through the sample -> reward -> advantage -> update loop of RL for LLM reasoning.

>>> import rlnb
>>> rlnb.tasks.get("add").reward("0+9=9;5+3=8;7+8=15>1589", "1589").reward
1.0
"""

import os as _os

# OpenMP threads that spin while they wait take a busy laptop's cores from the work (a doctor's GRPO step took 97.6 s
# instead of 4.7 s at one load): rlnb runs, and its runtimes were measured, with passive waits. Set before torch loads
# its OpenMP runtime, which reads it once (a process that imported torch first keeps its own); a value set wins.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from rlnb import algos, recipes, tasks  # noqa: E402
from rlnb.batch import Batch  # noqa: E402
from rlnb.core import __version__  # noqa: E402
from rlnb.loop import StepRecord, Trainer  # noqa: E402
from rlnb.models import load, load_default  # noqa: E402
from rlnb.recipe import Recipe  # noqa: E402
from rlnb.stages import Advantager, Rewarder, Sampler, Updater, UpdateStats  # noqa: E402

__all__ = [
    "Advantager", "Batch", "Recipe", "Rewarder", "Sampler", "StepRecord", "Trainer", "UpdateStats", "Updater",
    "algos", "load", "load_default", "recipes", "show_source", "tasks", "__version__",
]


def __getattr__(name):
    # rlnb.viz needs ipywidgets and plotly; a GPU server running only the loop and kernels may lack them,
    # so it loads on first use (`rlnb.viz.ClipExplorer`, `rlnb.show_source`), not at `import rlnb`
    if name in ("viz", "show_source"):
        import importlib

        viz = importlib.import_module("rlnb.viz")
        return viz if name == "viz" else viz.show_source
    raise AttributeError(f"module 'rlnb' has no attribute {name!r}")
