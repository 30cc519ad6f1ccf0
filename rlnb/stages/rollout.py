"""Sampling and rewarding P groups, with DAPO's dynamic sampling: refill the groups the filters drop."""

from __future__ import annotations

from collections.abc import Callable

import torch

from rlnb.batch import Batch


class Rollout:
    """Sampler then Rewarder on the next P prompts; with ``max_gen_rounds`` > 1 (DAPO's dynamic sampling)
    the groups the filters drop entirely are replaced by groups of fresh prompts, for at most
    ``max_gen_rounds`` rounds, and the batch keeps the first P groups that carry signal.

    Reads: prompts from ``next_prompts()`` (a prompt-only ``Batch``).
    Writes: what the Sampler and Rewarder write; with refills also ``keep`` (the filters' mask, computed
    once here, so the Advantager takes it as is). ``zero_std_per_round``: the share of zero-variance
    groups in each round as sampled (before the filters), for the ``frac_reward_zero_std_sampled`` metric.
    ``pass_rates`` (no-positive-resampling) sees every group that was sampled.
    """

    def __init__(self, sampler, rewarder, next_prompts: Callable[[], Batch], *, keep_mask: Callable[[Batch], torch.Tensor],
                 max_gen_rounds: int = 1, pass_rates=None):
        if not isinstance(max_gen_rounds, int) or max_gen_rounds < 1:
            raise ValueError(f"max_gen_rounds: expected an int >= 1, got {max_gen_rounds!r}")
        self.sampler, self.rewarder, self.next_prompts = sampler, rewarder, next_prompts
        self.keep_mask, self.max_gen_rounds, self.pass_rates = keep_mask, max_gen_rounds, pass_rates
        self.zero_std_per_round: list[float] = []

    def round(self, timer, emit) -> Batch:
        """One round: sample and reward the next P prompts."""
        with timer("sample"):
            batch = self.sampler.step(self.next_prompts())
        emit("sample", batch)
        with timer("reward"):
            batch = self.rewarder.step(batch)
        emit("reward", batch)
        if self.pass_rates is not None:
            self.pass_rates.update(batch.prompt_index[:: batch.group_size].tolist(), batch.correct, batch.group_size)
        return batch

    def step(self, timer=None, emit=lambda stage, batch: None) -> Batch:
        """``timer``: an ``rlnb.trainer_state.Timer`` that sums the stages' wall time (optional);
        ``emit(stage, batch)`` is called after each stage of each round."""
        from rlnb.trainer_state import Timer

        timer = timer if timer is not None else Timer()
        self.zero_std_per_round = []
        batch = self.round(timer, emit)
        if self.max_gen_rounds == 1:
            return batch
        P, G, kept = batch.P, batch.group_size, []
        for rounds in range(1, self.max_gen_rounds + 1):
            if rounds > 1:
                batch = self.round(timer, emit)
            self.zero_std_per_round.append(float((batch.rewards.view(-1, G).std(-1) == 0).float().mean()))
            keep = self.keep_mask(batch)                                   # (B,) rows the filters keep
            groups = keep.view(-1, G).any(-1).repeat_interleave(G)         # (B,) groups with a kept row
            kept.append(batch.replace(keep=keep).select(torch.nonzero(groups).flatten()))
            if sum(b.P for b in kept) >= P:
                break
        full = [b for b in kept if b.B]
        if not full:  # no round had a group with signal: train on the last one, all rows dropped
            return batch.replace(keep=self.keep_mask(batch))
        full = Batch.concat(full)
        return full.select(torch.arange(min(full.B, P * G)))
