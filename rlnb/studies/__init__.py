"""Training-level studies: each claim of the notebooks, measured over several seeds with its spread.

``run_study(arms, task=..., seeds=..., steps=...)`` trains every arm on every seed and returns a
``StudyResult`` (``summary()``, ``value()``, ``diff()``, ``curves()``, ``to_json()``); ``load_result(name)``
reloads the measured full-size result shipped in ``docs/results`` (every shipped study result is a
``StudyResult``: one format, ``rlnb.studies.results``). The presets in ``rlnb.studies.presets``
(``entropy_collapse``, ``beta``, ``reward_hacking``, ``credit_race`` ...) each return a ``Study``: the arms and
settings of one claim, in a full and a smoke size; ``python -m rlnb.studies run NAME`` runs one and writes its
result. Measured results: ``docs/studies.md``. Chapter helpers that are not studies live in ``rlnb.notebook``;
benchmarks in ``rlnb.bench``.
"""

from rlnb.studies.group_size import GroupSizeResult, group_size_study
from rlnb.studies.presets import (
    Study,
    beta,
    credit_race,
    dapo_ablation,
    dynamic_sampling,
    entropy_clip,
    entropy_collapse,
    get,
    group_size,
    is_smoke,
    length_bias,
    maxrl_vs_grpo,
    names,
    ppo_vs_grpo,
    reward_hacking,
    zoo_race,
)
from rlnb.studies.results import RunResult, StudyResult, load_result, result_names, results_dir
from rlnb.studies.runner import run_one, run_study
from rlnb.studies.summary import Stat, Table

__all__ = [
    "GroupSizeResult", "RunResult", "Stat", "Study", "StudyResult", "Table", "beta", "credit_race", "dapo_ablation",
    "dynamic_sampling", "entropy_clip", "entropy_collapse", "get", "group_size", "group_size_study", "is_smoke",
    "length_bias", "load_result", "maxrl_vs_grpo", "names", "ppo_vs_grpo", "result_names", "results_dir",
    "reward_hacking", "run_one", "run_study", "zoo_race",
]
