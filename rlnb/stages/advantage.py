"""Stage 3, the Advantager: turn rewards into advantages, and decide which rows enter the loss."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from rlnb.algos.registry import extra_inputs
from rlnb.algos.rollout_correction import compose
from rlnb.batch import Batch, require
from rlnb.core.checks import nonfinite_rows
from rlnb.stages.refill import keep_mask


class Advantager:
    """``adv = estimator(rewards, G, **extra inputs)``; ``keep`` = AND of the filters' keep masks.

    Reads: ``rewards``, ``group_size``, ``correct``, ``truncated``; the extra inputs the estimator lists
    (``rlnb.algos.extra_inputs``), each the batch attribute of that name (``lengths``) or else
    ``extras[name]`` (``greedy_rewards``); with a critic also ``old_values`` and ``mask``.
    Writes: ``adv`` ((B,), or (B, T) with a critic or a per-token estimator such as VinePPO's), ``keep`` (B,), and with a
    critic ``returns`` (B, T). A batch that already carries ``keep`` (``DynamicSampling``'s, which ran the
    filters to refill groups, or yours) is taken as it is: the filters run once per step.

    ``estimator`` and ``filters`` are bound registry functions (``rlnb.algos.bind(ADVANTAGES[name],
    recipe)``), so the stage never needs to know which algorithm it runs. With ``gae`` given (PPO with a
    critic) the reward sits on each completion's last token and advantages come per token from the
    value head's estimates instead of from the group.
    """

    def __init__(self, estimator: Callable[[torch.Tensor, int], torch.Tensor], *,
                 filters: Sequence[Callable] = (), gae: Callable | None = None, corrections: Sequence[Callable] = ()):
        for arg, fn in (("estimator", estimator), *((f"filters[{i}]", f) for i, f in enumerate(filters))):
            if not callable(fn):
                raise TypeError(f"{arg}: expected a callable (a bound registry entry), got {fn!r}")
        self.estimator, self.filters, self.gae = estimator, tuple(filters), gae
        self.corrections = tuple(corrections)  # bound ROLLOUT_CORRECTIONS: their IS weights, for estimators reading them

    def keep_mask(self, batch: Batch) -> torch.Tensor:
        """(B,) bool: rows every filter keeps (all True without filters)."""
        return keep_mask(self.filters, batch)

    def inputs(self, batch: Batch) -> dict:
        """The extra tensors the estimator reads, by name (None where the batch has none: the estimator's
        own ValueError then names what is missing)."""
        out = {name: _input(batch, name) for name in extra_inputs(self.estimator)}
        if "rollout_is_weights" in out and self.corrections and batch.rollout_logp is not None:
            out["rollout_is_weights"] = self.is_weights(batch)
        return out

    def is_weights(self, batch: Batch) -> torch.Tensor:
        """(B, T) the rollout corrections' IS weights pi_old / mu, computed before the update as verl does."""
        old = batch.old_logp if batch.old_logp is not None else batch.rollout_logp
        return compose(self.corrections, old, old, batch.rollout_logp, batch.rewards, batch.mask).is_weight

    def step(self, batch: Batch) -> Batch:
        require(batch, ["rewards"] + (["old_values", "old_logp", "mask"] if self.gae is not None else []), "Advantager")
        keep = self.keep_mask(batch) if batch.keep is None else batch.keep  # the filters run once
        if self.gae is None:
            adv = self.estimator(batch.rewards, batch.group_size, **self.inputs(batch))
            shapes = (batch.rewards.shape,) + ((batch.mask.shape,) if batch.mask is not None else ())
            if not isinstance(adv, torch.Tensor) or adv.shape not in shapes:  # (B, T): per-token estimators
                got = tuple(adv.shape) if isinstance(adv, torch.Tensor) else type(adv).__name__
                raise ValueError(f"estimator: expected ({batch.B},) or ({batch.B}, T) advantages from "
                                 f"{_name(self.estimator)}, got {got}")
            if not torch.isfinite(adv).all():
                rows = nonfinite_rows(adv)
                raise ValueError(f"adv: the advantage estimator {_name(self.estimator)} gave NaN or inf in rows {rows} "
                                 f"(rewards there: {batch.rewards[rows].tolist()})")
            return batch.replace(adv=adv.float(), keep=keep)
        last = (batch.lengths - 1).clamp(min=0)                            # (B,) index of each final token
        token_rewards = torch.zeros_like(batch.old_logp)                   # (B, T)
        token_rewards[torch.arange(batch.B), last] = batch.rewards
        adv, returns = self.gae(token_rewards, batch.old_values, batch.mask)
        return batch.replace(adv=adv.float(), returns=returns.float(), keep=keep)


def _input(batch: Batch, name: str):
    return getattr(batch, name) if hasattr(batch, name) else batch.extras.get(name)


def _name(fn) -> str:
    """A registry entry's name (also through ``functools.partial``), else its repr."""
    return repr(getattr(getattr(fn, "func", fn), "registry_name", fn))
