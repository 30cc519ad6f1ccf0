"""The per-token losses the fused kernel computes, written once in plain torch.

These mirror ``rlnb.algos.losses`` (same formulas, masks and TRL clip flags) for the losses that are
defined per token, so the kernel's epilogue has a torch twin to be tested against. ``adv`` may be
``(B,)`` (one advantage per completion, broadcast over tokens) or the full ``(B, T)``.

Clip flags follow TRL for every loss: ``clipped_low = rho < 1 - eps_low and A < 0``,
``clipped_high = rho > 1 + eps_high and A > 0`` (masked tokens are never flagged).
``weight = -d loss / d logp`` (detached), the per-token weight on grad logp.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class TokenLossOut(NamedTuple):
    logp: torch.Tensor          # (B, T) fp32 log pi(y_t), differentiable
    entropy: torch.Tensor | None  # (B, T) fp32 H_t, differentiable, or None
    loss: torch.Tensor          # (B, T) per-token loss (zero where mask is 0), differentiable
    ratio: torch.Tensor         # (B, T) rho = exp(logp - old_logp), detached
    clipped_low: torch.Tensor   # (B, T) bool
    clipped_high: torch.Tensor  # (B, T) bool
    weight: torch.Tensor        # (B, T) -d loss / d logp, detached, zero where mask is 0


def _pg(logp, ratio, A, *, eps_low, eps_high, dual_clip_c):
    """REINFORCE / policy gradient: loss = -A logp."""
    return -A * logp, A


def _ppo_clip(logp, ratio, A, *, eps_low, eps_high, dual_clip_c):
    """PPO clip (1707.06347), asymmetric as in DAPO: max(-A rho, -A clip(rho, 1-eps_low, 1+eps_high)).

    Dual clip (Ye et al. 1912.09729), for A < 0 only: min(that, -A c), so a negative-advantage token whose
    ratio exploded past c contributes a constant and no gradient.
    """
    loss = torch.maximum(-A * ratio, -A * ratio.clamp(1 - eps_low, 1 + eps_high))
    active = ~(((ratio < 1 - eps_low) & (A < 0)) | ((ratio > 1 + eps_high) & (A > 0)))
    if dual_clip_c is not None:
        dual = (A < 0) & (ratio > dual_clip_c)
        loss = torch.where(A < 0, torch.minimum(loss, -A * dual_clip_c), loss)
        active = active & ~dual
    return loss, A * ratio * active


def _cispo(logp, ratio, A, *, eps_low, eps_high, dual_clip_c):
    """CISPO (MiniMax-M1, 2506.13585): loss = -sg(min(rho, 1 + eps_high)) A logp.

    Convention: the cap is relative, 1 + eps_high; only the upper side is capped (the paper's lower
    bound is effectively unused). Some libraries pass the absolute cap (e.g. 5.0) instead.
    """
    w = A * ratio.clamp(max=1 + eps_high).detach()
    return -w * logp, w


# name -> (torch function, code of the same formula in the Triton kernel's epilogue)
TOKEN_LOSSES = {"pg": (_pg, 0), "ppo_clip": (_ppo_clip, 1), "cispo": (_cispo, 2)}


def loss_fn(name: str):
    """The (torch function, kernel code) pair for a per-token loss name."""
    if name not in TOKEN_LOSSES:
        raise KeyError(f"loss: unknown per-token loss {name!r}; known: {sorted(TOKEN_LOSSES)}")
    return TOKEN_LOSSES[name]


def token_adv(adv: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    """Broadcast (B,) advantages over tokens; pass (B, T) through. Checks the shape."""
    if adv.shape == logp.shape:
        return adv
    if adv.shape == logp.shape[:-1]:
        return adv.unsqueeze(-1).expand_as(logp)
    raise ValueError(f"adv: expected shape {tuple(logp.shape)} or {tuple(logp.shape[:-1])}, got {tuple(adv.shape)}")


def token_loss_terms(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, *,
                     loss: str = "ppo_clip", eps_low: float = 0.2, eps_high: float = 0.2,
                     dual_clip_c: float | None = None):
    """(loss, ratio, clipped_low, clipped_high, weight), all (B, T), from per-token logp.

    >>> lp = torch.log(torch.tensor([[1.5, 0.5]])); z = torch.zeros(1, 2); m = torch.ones(1, 2)
    >>> token_loss_terms(lp, z, torch.tensor([1.]), m, loss="ppo_clip")[0]   # -1.2 (clipped), -0.5
    tensor([[-1.2000, -0.5000]])
    >>> token_loss_terms(lp, z, torch.tensor([1.]), m, loss="cispo")[4]      # weight min(rho, 1.2) A
    tensor([[1.2000, 0.5000]])
    """
    fn, _ = loss_fn(loss)
    A = token_adv(adv, logp)                                   # (B, T)
    if old_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError(f"old_logp, mask: expected shape {tuple(logp.shape)}, "
                         f"got {tuple(old_logp.shape)} and {tuple(mask.shape)}")
    m = mask.to(torch.float32)
    if dual_clip_c is not None and not dual_clip_c > 1:
        raise ValueError(f"dual_clip_c: expected a number > 1 (paper: 3) or None, got {dual_clip_c}")
    ratio = torch.exp(logp - old_logp)                         # (B, T), differentiable for PPO
    per_token, w = fn(logp, ratio, A, eps_low=eps_low, eps_high=eps_high, dual_clip_c=dual_clip_c)
    on = mask.bool()
    ratio = ratio.detach()
    low = (ratio < 1 - eps_low) & (A < 0) & on
    high = (ratio > 1 + eps_high) & (A > 0) & on
    return per_token * m, ratio, low, high, (w * m).detach()
