"""The prefix-value stage: Monte-Carlo values of every prefix of every completion, for VinePPO's credit."""

from __future__ import annotations

import torch

from rlnb.batch import Batch
from rlnb.credit import prefix_values


class PrefixValuer:
    """``extras["prefix_values"]`` (B, T + 1) = ``rlnb.credit.prefix_values`` of the batch, K continuations
    per prefix, sampled like the Sampler samples (same temperature, top_p and token budget).

    Reads: what the Sampler writes. Writes: ``extras["prefix_values"]``. Runs between the Rewarder and the
    Advantager when the advantage estimator lists ``prefix_values`` in its ``extra_inputs``.
    ``sampled_tokens``: the continuation tokens sampled so far (the price of the credit, for budgets).
    """

    def __init__(self, model, tokenizer, task, *, K: int = 4, temperature: float = 1.0, top_p: float = 1.0,
                 max_new_tokens: int = 32, generator: torch.Generator | None = None):
        if isinstance(K, bool) or not isinstance(K, int) or K < 1:
            raise ValueError(f"K: expected a positive int (mc_rollouts), got {K!r}")
        self.model, self.tokenizer, self.task, self.K = model, tokenizer, task, K
        self.temperature, self.top_p, self.max_new_tokens = temperature, top_p, max_new_tokens
        self.generator = generator
        self.sampled_tokens = 0

    def step(self, batch: Batch) -> Batch:
        stats: dict = {}
        values = prefix_values(self.model, self.tokenizer, batch, self.task, K=self.K, temperature=self.temperature,
                               top_p=self.top_p, max_new_tokens=max(self.max_new_tokens, batch.completion_ids.shape[1]),
                               generator=self.generator, stats=stats)
        self.sampled_tokens += stats["sampled_tokens"]
        return batch.replace(extras={**batch.extras, "prefix_values": values})
