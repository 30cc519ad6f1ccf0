"""rlnb: step through the sample -> reward -> advantage -> update loop of RL for LLM reasoning.

>>> import rlnb
>>> rlnb.tasks.get("add").reward("0+9=9;5+3=8;7+8=15>1589", "1589").reward
1.0
"""

from rlnb import algos, recipes, tasks
from rlnb.batch import Batch
from rlnb.core import __version__
from rlnb.loop import StepRecord, Trainer
from rlnb.models import load, load_default
from rlnb.recipe import Recipe
from rlnb.stages import Advantager, Rewarder, Sampler, Updater, UpdateStats

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
