"""Per-token policy losses. Each returns the per-token loss and what the widgets need to see.

Signature: ``fn(logp, old_logp, adv, mask, *, <hyper>) -> LossOut`` on ``(B, T)`` tensors
(``adv`` may be ``(B,)``; it is broadcast over tokens). The loss is *minimised* (= -objective).
Aggregation to a scalar is a separate step (``rlnb.algos.aggregation``).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from rlnb.algos.registry import Registry

POLICY_LOSSES = Registry("policy loss")


class LossOut(NamedTuple):
    loss: torch.Tensor          # (B, T) per-token loss, zero where mask is 0
    ratio: torch.Tensor         # (B, T) rho = exp(logp - old_logp), detached
    clipped_low: torch.Tensor   # (B, T) bool: rho < 1 - eps_low and A < 0 (TRL's clip_ratio/low)
    clipped_high: torch.Tensor  # (B, T) bool: rho > 1 + eps_high and A > 0 (TRL's clip_ratio/high)
    weight: torch.Tensor        # (B, T) -d loss / d logp, detached: the per-token weight on grad logp


def _token_adv(adv: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    return adv.unsqueeze(-1).expand_as(logp) if adv.dim() == 1 else adv


@POLICY_LOSSES.register("ppo_clip")
def ppo_clip(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    adv: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
) -> LossOut:
    """PPO clipped surrogate (Schulman et al. 2017, arXiv 1707.06347), asymmetric bounds as in DAPO.

    loss_t = max(-A rho_t, -A clip(rho_t, 1 - eps_low, 1 + eps_high)),  rho_t = exp(logp_t - old_logp_t)
    TRL names: ``epsilon`` (= eps_low) and ``epsilon_high``.

    >>> lp = torch.log(torch.tensor([[1.5, 0.5]])); out = ppo_clip(lp, torch.zeros(1, 2), torch.tensor([1.]), torch.ones(1, 2))
    >>> out.loss, out.clipped_high
    (tensor([[-1.2000, -0.5000]]), tensor([[ True, False]]))
    """
    A = _token_adv(adv, logp)                                  # (B, T)
    ratio = torch.exp(logp - old_logp)                         # (B, T)
    clipped = ratio.clamp(1 - eps_low, 1 + eps_high)
    loss = torch.maximum(-A * ratio, -A * clipped) * mask
    low = (ratio < 1 - eps_low) & (A < 0) & mask.bool()
    high = (ratio > 1 + eps_high) & (A > 0) & mask.bool()
    weight = (A * ratio * ~(low | high)).detach() * mask       # d(-A rho)/d logp = -A rho; 0 when clipped
    return LossOut(loss, ratio.detach(), low, high, weight)
