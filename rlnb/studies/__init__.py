"""Training-level studies: each claim of the notebooks, measured over several seeds with its spread.

``run_study(arms, task=..., seeds=..., steps=...)`` trains every arm on every seed and returns a
``StudyResult`` (``summary()``, ``value()``, ``diff()``, ``curves()``, ``to_json()``); ``load_result(name)``
reloads the measured full-size result shipped in ``docs/results``. The presets in
``rlnb.studies.presets`` (``entropy_collapse``, ``beta``, ``length_bias`` ...) each return a ``Study``:
the arms and settings of one claim, in a full and a smoke size. Measured results: ``docs/studies.md``.
"""

from rlnb.studies.group_size import GroupSizeResult, group_size_study
from rlnb.studies.presets import (
    Study,
    beta,
    dapo_ablation,
    dynamic_sampling,
    entropy_collapse,
    get,
    group_size,
    is_smoke,
    length_bias,
    maxrl_vs_grpo,
    names,
    zoo_race,
)
from rlnb.studies.results import load_result, result_names, results_dir
from rlnb.studies.runner import RunResult, StudyResult, run_one, run_study
from rlnb.studies.summary import Stat, Table

__all__ = [
    "GroupSizeResult", "RunResult", "Stat", "Study", "StudyResult", "Table", "beta", "dapo_ablation",
    "dynamic_sampling", "entropy_collapse", "get", "group_size", "group_size_study", "is_smoke", "length_bias",
    "load_result", "maxrl_vs_grpo", "names", "result_names", "results_dir", "run_one", "run_study", "zoo_race",
]
