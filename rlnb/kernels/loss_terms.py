"""Which per-token losses the fused kernel computes, and their plain-torch definition: the zoo's.

The formulas, masks, clip flags and ``weight = -d loss / d logp`` are those of ``rlnb.algos.losses``
(one copy of the math); the Triton epilogue in ``token_loss.py`` re-implements them on scalars and the
tests hold it to these functions. Hyperparameters not given take the zoo function's own defaults (for
example CISPO's ``eps_low = 1.0``: no lower bound).
"""

from __future__ import annotations

import inspect
from typing import NamedTuple

import torch

from rlnb.algos.losses import POLICY_LOSSES

# name -> code of the same formula in the Triton kernel's epilogue
KERNEL_LOSSES = {"pg": 0, "ppo_clip": 1, "cispo": 2}


class TokenLossOut(NamedTuple):
    logp: torch.Tensor            # (B, T) fp32 log pi(y_t), differentiable
    entropy: torch.Tensor | None  # (B, T) fp32 H_t, differentiable, or None
    loss: torch.Tensor            # (B, T) per-token loss (zero where mask is 0), differentiable
    ratio: torch.Tensor           # (B, T) rho = exp(logp - old_logp), detached
    clipped_low: torch.Tensor     # (B, T) bool, as defined per loss in rlnb.algos.losses
    clipped_high: torch.Tensor    # (B, T) bool
    weight: torch.Tensor          # (B, T) -d loss / d logp, detached, zero where mask is 0


def loss_hyper(loss: str, **given) -> dict:
    """The loss's keyword hyperparameters: those given (not None), else the zoo function's defaults.

    >>> loss_hyper("cispo", eps_high=0.3)
    {'eps_low': 1.0, 'eps_high': 0.3, 'cispo_cap': None}
    """
    if loss not in KERNEL_LOSSES:
        raise KeyError(f"loss: {loss!r} has no fused kernel; known: {sorted(KERNEL_LOSSES)} "
                       f"(other POLICY_LOSSES run on the log-probs from token_logprobs)")
    params = inspect.signature(POLICY_LOSSES[loss]).parameters
    unknown = [k for k, v in given.items() if v is not None and k not in params]
    if unknown:
        raise ValueError(f"{unknown}: not hyperparameters of loss {loss!r}")
    return {k: (given[k] if given.get(k) is not None else p.default)
            for k, p in params.items() if p.kind == p.KEYWORD_ONLY}


def kernel_bounds(loss: str, hyper: dict) -> tuple[float, float, float | None]:
    """(lo, hi, dual_clip_c) for the kernel: the ratio's clip bounds as the zoo defines them."""
    lo = 1 - hyper.get("eps_low", 0.0)
    hi = 1 + hyper.get("eps_high", 0.0)
    if hyper.get("cispo_cap") is not None:
        hi = hyper["cispo_cap"]
    return lo, hi, hyper.get("dual_clip_c")


def token_loss_terms(logp, old_logp, adv, mask, *, loss: str = "ppo_clip", **hyper):
    """(loss, ratio, clipped_low, clipped_high, weight) from per-token logp (B, T), by the zoo function."""
    return tuple(POLICY_LOSSES[loss](logp, old_logp, adv, mask, **loss_hyper(loss, **hyper)))
