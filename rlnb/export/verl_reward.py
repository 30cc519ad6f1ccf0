"""An rlnb task's verifier as a verl reward function (``reward.custom_reward_function``, name ``compute_score``).

verl's reward manager calls ``compute_score(data_source, solution_str, ground_truth, extra_info)`` once per
completion (the decoded response); each parquet row written by ``VerlExport.write_data`` carries the task's
name and the recipe's reward weights in ``extra_info``. The score is what rlnb's ``Rewarder`` sums:
``correct + format_weight x format`` (DAPO's overlong penalty is added by verl's ``dapo`` reward manager); the
parts come back too, for verl's logs and for GDPO (``algorithm.gdpo_reward_keys``).

>>> compute_score("rlnb/add", "4+7=11;8+4=12;2+2=4>531", "531", {"task": "add", "weights": {"format": 0.5}})
{'score': 1.5, 'correct': 1.0, 'format': 1.0}
"""

from __future__ import annotations

from functools import cache


@cache
def _funcs(task: str) -> dict:
    from rlnb import tasks

    return tasks.get(task).reward_funcs()


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> dict:
    """``{"score": weighted sum, <part>: value, ...}`` for one completion, as rlnb's Rewarder scores it."""
    info = dict(extra_info or {})
    if "task" not in info:
        raise ValueError(f"extra_info: expected the rlnb task's name under 'task' (rows written by "
                         f"VerlExport.write_data), got {sorted(info)} for data_source {data_source!r}")
    weights = {"correct": 1.0, **(info.get("weights") or {})}
    parts = {name: float(fn([solution_str], [ground_truth])[0]) for name, fn in _funcs(info["task"]).items()}
    return {"score": sum(weights.get(name, 1.0) * v for name, v in parts.items()), **parts}
