"""The training prompts: a pool drawn in a fresh permutation each pass, P at a time, G copies of each."""

from __future__ import annotations

import torch

from rlnb.batch import Batch
from rlnb.core.runtime import hash_seed


class PromptPool:
    """Draws the next P prompts of ``pool`` (a ``datasets.Dataset`` with ``prompt`` and ``answer``).

    ``drawn`` is the cursor (part of the run's state); the permutation of each pass is a function of the seed
    and the pass number only, so a run resumed at any cursor draws the same prompts. Prompts that
    ``pass_rates`` (no-positive-resampling) has retired are skipped.
    """

    def __init__(self, pool, seed: int):
        self.pool, self.seed, self.drawn = pool, seed, 0
        self._perm_cache: tuple[int, torch.Tensor] | None = None

    def perm(self, epoch: int) -> torch.Tensor:
        """The order of pass ``epoch`` over the pool."""
        if self._perm_cache is None or self._perm_cache[0] != epoch:
            g = torch.Generator().manual_seed(hash_seed(self.seed, f"epoch{epoch}"))
            self._perm_cache = (epoch, torch.randperm(len(self.pool), generator=g))
        return self._perm_cache[1]

    def next(self, P: int, G: int, pass_rates=None) -> Batch:
        picked, n = [], len(self.pool)
        for _ in range(n * 2 + P):  # two passes are enough to find P live prompts, or there are none
            epoch, pos = divmod(self.drawn, n)
            idx = int(self.perm(epoch)[pos])
            self.drawn += 1
            if pass_rates is None or pass_rates.keep([idx])[0]:
                picked.append(idx)
            if len(picked) == P:
                return Batch.from_rows(self.pool[picked], G, prompt_index=picked)
        raise RuntimeError(f"pass_rate_threshold: every prompt of the pool is retired ({pass_rates.summary()})")
