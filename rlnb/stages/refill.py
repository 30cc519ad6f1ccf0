"""DAPO's dynamic sampling, a stage of its own between the Rewarder and the Advantager: refill the groups the
filters drop with groups of fresh prompts."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from rlnb.batch import Batch


def keep_mask(filters: Sequence[Callable], batch: Batch) -> torch.Tensor:
    """(B,) bool: the rows every filter keeps (all True without filters). The Advantager and dynamic
    sampling both ask this of the same bound filters."""
    keep = torch.ones(batch.B, dtype=torch.bool)
    for f in filters:
        keep &= f(batch.rewards, batch.group_size, truncated=batch.truncated, correct=batch.correct).bool()
    return keep


class DynamicSampling:
    """With ``max_gen_rounds`` > 1 (DAPO's dynamic sampling) the groups the filters drop entirely are replaced
    by groups of fresh prompts, for at most ``max_gen_rounds`` rounds, and the batch keeps the first P groups
    that carry signal. With ``max_gen_rounds`` = 1 it passes the batch through.

    Reads: a rewarded ``Batch``, and ``more()``: the next round, sampled and rewarded (the Trainer's own stages).
    Writes: with refills, ``keep`` (the filters' mask, computed once here, so the Advantager takes it as is).
    ``zero_std_per_round``: the share of zero-variance groups in each round as sampled (before the filters),
    for the ``frac_reward_zero_std_sampled`` metric. ``pass_rates`` (no-positive-resampling) sees every group
    that was sampled, refills included.
    """

    def __init__(self, filters: Sequence[Callable] = (), *, max_gen_rounds: int = 1, pass_rates=None):
        if not isinstance(max_gen_rounds, int) or isinstance(max_gen_rounds, bool) or max_gen_rounds < 1:
            raise ValueError(f"max_gen_rounds: expected an int >= 1, got {max_gen_rounds!r}")
        self.filters, self.max_gen_rounds, self.pass_rates = tuple(filters), max_gen_rounds, pass_rates
        self.zero_std_per_round: list[float] = []

    def seen(self, batch: Batch) -> Batch:
        """Count a sampled round's groups in the pass-rate history."""
        if self.pass_rates is not None:
            self.pass_rates.update(batch.prompt_index[:: batch.group_size].tolist(), batch.correct, batch.group_size)
        return batch

    def step(self, batch: Batch, more: Callable[[], Batch] | None = None) -> Batch:
        self.zero_std_per_round = []
        self.seen(batch)
        if self.max_gen_rounds == 1:
            return batch
        if more is None:
            raise ValueError("more: dynamic sampling (max_gen_rounds > 1) needs a function that samples and "
                             "rewards the next round")
        P, G, kept = batch.P, batch.group_size, []
        for rounds in range(1, self.max_gen_rounds + 1):
            if rounds > 1:
                batch = self.seen(more())
            self.zero_std_per_round.append(float((batch.rewards.view(-1, G).std(-1) == 0).float().mean()))
            keep = keep_mask(self.filters, batch)                          # (B,) rows the filters keep
            groups = keep.view(-1, G).any(-1).repeat_interleave(G)         # (B,) groups with a kept row
            kept.append(batch.replace(keep=keep).select(torch.nonzero(groups).flatten()))
            if sum(b.P for b in kept) >= P:
                break
        full = [b for b in kept if b.B]
        if not full:  # no round had a group with signal: train on the last one, all rows dropped
            return batch.replace(keep=keep_mask(self.filters, batch))
        full = Batch.concat(full)
        return full.select(torch.arange(min(full.B, P * G)))
