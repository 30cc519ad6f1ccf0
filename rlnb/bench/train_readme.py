"""The README's "GRPO on the default, in a terminal" table, generated from the run's own summary
(``docs/train_grpo_add.json``: the ``summary.json`` that ``rlnb train --recipe grpo --task add --steps 200 --out
runs/grpo-add`` wrote), so the numbers cannot drift from what the command measured. ``scripts/regen_tables.py`` writes
it between the README's ``train`` markers; tests/test_bench_readme.py fails when the two differ.
"""

from __future__ import annotations

import json
from pathlib import Path

STAGES = ("sample", "reward", "advantage", "update")


def _seconds(x: float) -> str:
    return "<0.001 s" if x < 0.001 else f"{x:.3f} s"


def train_markdown(path: Path) -> str:
    """The table: greedy pass@1 before and after, the training's wall time, the mean seconds per stage."""
    s = json.loads(Path(path).read_text())
    missing = [k for k in ("greedy_pass@1_before", "greedy_pass@1_after", "steps", "wall_s_this_invocation",
                           "mean_time_per_stage_s") if k not in s]
    if missing:
        raise ValueError(f"{path}: expected rlnb train's summary.json, missing {missing}")
    per = s["mean_time_per_stage_s"]
    stages = " / ".join(_seconds(per.get(f"timing/{k}_s", 0.0)) for k in STAGES)
    return ("| greedy pass@1 before | after {n} steps | wall time (training) | {names} per step |\n"
            "|---|---|---|---|\n"
            "| {b:.3f} | {a:.3f} | {w:.0f} s | {st} |").format(
        n=s["steps"], names=" / ".join(STAGES), b=s["greedy_pass@1_before"], a=s["greedy_pass@1_after"],
        w=s["wall_s_this_invocation"], st=stages)
