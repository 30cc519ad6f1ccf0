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

from rlnb.core import __version__  # noqa: E402  (torch-free: rlnb.core imports nothing heavy at package level)
from rlnb.core import heap as _heap  # noqa: E402

# A step frees its activations and allocates them again: glibc's malloc then keeps the freed pages instead of
# handing them back and faulting them in again (rlnb.core.heap: a 64-row forward 74-83 ms -> 61-63 ms).
_heap.keep_freed_memory()

# The names below load on first use (PEP 562), not at `import rlnb`: the `rlnb` command (rlnb.cli) runs this file
# first, and `rlnb doctor` / `rlnb course` must print before torch's seconds of import. `rlnb.Trainer`,
# `from rlnb import Recipe` and `rlnb.tasks` work as before. rlnb.viz also needs ipywidgets and plotly, which a GPU
# server running only the loop and kernels may lack.
_SUBMODULES = ("algos", "recipes", "tasks", "viz")
_NAMES = {"Batch": "rlnb.batch", "StepRecord": "rlnb.loop", "Trainer": "rlnb.loop", "load": "rlnb.models",
          "load_default": "rlnb.models", "Recipe": "rlnb.recipe", "Advantager": "rlnb.stages",
          "Rewarder": "rlnb.stages", "Sampler": "rlnb.stages", "Updater": "rlnb.stages", "UpdateStats": "rlnb.stages",
          "show_source": "rlnb.viz"}

__all__ = [
    "Advantager", "Batch", "Recipe", "Rewarder", "Sampler", "StepRecord", "Trainer", "UpdateStats", "Updater",
    "algos", "load", "load_default", "recipes", "show_source", "tasks", "__version__",
]


def __getattr__(name):
    import importlib
    import importlib.util

    if name in _NAMES:
        value = getattr(importlib.import_module(_NAMES[name]), name)
        globals()[name] = value  # the next look-up is a plain attribute
        return value
    # any subpackage, as when `import rlnb` loaded them all: `rlnb.check.expect`, `rlnb.run.controllers`
    if name in _SUBMODULES or (not name.startswith("_") and importlib.util.find_spec(f"rlnb.{name}") is not None):
        return importlib.import_module(f"rlnb.{name}")
    raise AttributeError(f"module 'rlnb' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__all__})
