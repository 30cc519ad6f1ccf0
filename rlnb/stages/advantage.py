"""Stage 3, the Advantager: turn each group's rewards into advantages with a registry estimator."""

from __future__ import annotations

from collections.abc import Callable

import torch

from rlnb.batch import Batch


class Advantager:
    """``adv = estimator(rewards, G)`` with the estimator looked up once in ``ADVANTAGES``.

    Reads: ``rewards``, ``group_size``.
    Writes: ``adv`` (B,), ``keep`` (B,) (all True unless filters drop rows).

    ``estimator`` is a bound registry function (``rlnb.algos.bind(ADVANTAGES[name], recipe)``), so the
    stage never needs to know which algorithm it runs.
    """

    def __init__(self, estimator: Callable[[torch.Tensor, int], torch.Tensor]):
        self.estimator = estimator

    def step(self, batch: Batch) -> Batch:
        if batch.rewards is None:
            raise ValueError("batch.rewards: expected rewards from the Rewarder, got None (run Rewarder.step first)")
        adv = self.estimator(batch.rewards, batch.group_size).float()     # (B,)
        keep = batch.keep if batch.keep is not None else torch.ones(batch.B, dtype=torch.bool)
        return batch.replace(adv=adv, keep=keep)
