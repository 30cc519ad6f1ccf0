"""Per-step metrics, under TRL's names where TRL has one."""

from __future__ import annotations

import torch

from rlnb.batch import Batch
from rlnb.stages.update import UpdateStats


def group_std(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """(P,) population std of each group's rewards (0 for a group of identical rewards)."""
    return rewards.view(-1, group_size).std(dim=1, unbiased=False)


def step_metrics(batch: Batch, stats: UpdateStats) -> dict[str, float]:
    """Reward, signal and length statistics of the batch, plus the update's scalars."""
    lengths = batch.lengths.float()                                      # (B,)
    correct = batch.correct if batch.correct is not None else batch.rewards > 0
    std = group_std(batch.rewards, batch.group_size)
    mean_len = lambda sel: float(lengths[sel].mean()) if sel.any() else None  # noqa: E731  (JSON null)
    out = {
        "reward": float(batch.rewards.mean()),
        "reward_std": float(std.mean()),
        "frac_reward_zero_std": float((std == 0).float().mean()),
        "accuracy": float(correct.float().mean()),
        "completions/mean_length": float(lengths.mean()),
        "completions/mean_length_correct": mean_len(correct),
        "completions/mean_length_wrong": mean_len(~correct),
        "completions/clipped_ratio": float(batch.truncated.float().mean()),
    }
    for name, part in (batch.reward_parts or {}).items():
        out[f"rewards/{name}/mean"] = float(part.mean())
    out.update(stats.metrics())
    return out
