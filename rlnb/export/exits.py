"""The three ways out side by side: per recipe, what TRL and verl cannot express (docs/scaling_up.md's table,
written by ``scripts/regen_tables.py``; ``tests/test_export_verl_launch.py`` fails when the committed one is stale),
and ``verl_table``: each recipe's verl loss settings.

>>> print(exits_table(["grpo"]).splitlines()[-1])
| `grpo` | yes | all | all |
"""

from __future__ import annotations

from rlnb import recipes as recipes_mod
from rlnb.export.trl_map import trl_mapping
from rlnb.export.verl_map import A, verl_mapping


def _gaps(mapping) -> str:
    fields = sorted({g.field for g in mapping.unsupported})
    return "all" if not fields else "all but " + ", ".join(f"`{f}`" for f in fields)


def exits_table(names: list[str] | None = None) -> str:
    """A markdown table: each recipe on rlnb (one GPU), TRL's GRPOTrainer and verl's PPO trainer."""
    lines = ["| recipe | rlnb, one GPU | TRL 1.16 `GRPOTrainer` | verl 0.9.1 PPO trainer |", "|---|---|---|---|"]
    for name in names or recipes_mod.names():
        lines.append(f"| `{name}` | yes | {_gaps(trl_mapping(name))} | {_gaps(verl_mapping(name))} |")
    return "\n".join(lines)


def verl_table(names: list[str] | None = None) -> str:
    """A markdown table: each recipe's verl settings and what verl cannot express (docs, notebook 15)."""
    lines = ["| recipe | adv_estimator | loss_mode | loss_agg_mode | not expressible in verl |", "|---|---|---|---|---|"]
    for name in names or recipes_mod.names():
        m = verl_mapping(name)
        o = m.overrides
        gaps = ", ".join(f"`{g.field}={g.value!r}`" for g in m.unsupported) or "-"
        lines.append(f"| `{name}` | `{o['algorithm.adv_estimator']}` | `{o[A + 'policy_loss.loss_mode']}` | "
                     f"`{o[A + 'loss_agg_mode']}` | {gaps} |")
    return "\n".join(lines)
