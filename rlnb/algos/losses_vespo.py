"""VESPO's policy loss: REINFORCE weighted by a smooth, bounded function of the sequence's IS ratio.

Same signature as ``rlnb.algos.losses``: ``fn(logp, old_logp, adv, mask, *, <hyper>) -> LossOut`` on
``(B, T)`` tensors (``adv`` (B,) or (B, T)), minimised. It also takes ``is_weight`` (B, T), the rollout
correction's token IS weights (``rlnb.algos.rollout_correction``), and folds them into its sequence ratio
(``folds_is_weight``): the Updater then passes them instead of multiplying the loss by them.
"""

from __future__ import annotations

import math

import torch

from rlnb.algos.inputs import prepare_tokens as _prepare
from rlnb.algos.losses import POLICY_LOSSES, LossOut

LOG_MIN = math.log(1e-8)  # TRL clamps log-weights to [log 1e-8, 20]


@POLICY_LOSSES.register("vespo")
def vespo(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor,
          is_weight: torch.Tensor | None = None, *, vespo_k_pos: float = 2.0, vespo_lambda_pos: float = 3.0,
          vespo_k_neg: float = 3.0, vespo_lambda_neg: float = 2.0) -> LossOut:
    """VESPO (arXiv 2602.10693), as TRL 1.16's ``loss_type="vespo"``:

    w_i = exp(sum_t log rho_{i,t} [+ sum_t log is_weight_{i,t}]),   phi(w) = e^lam w^k e^(-lam w),
    loss_t = -sg(phi(w_i)) A_i logp_t,   (k, lam) = (k_pos, lam_pos) if A_i >= 0 else (k_neg, lam_neg).

    phi is a gamma-shaped weight normalised so phi(1) = 1: on-policy it is REINFORCE; a sequence whose
    ratio drifted low (w^k) or high (e^(-lam w)) is smoothly down-weighted, so no hard clip edge and no
    unbounded IS weight. The sequence ratio is a *sum* of token log-ratios (a product of ratios, unlike
    GSPO's mean), each clamped to [-20, 20], and log w to [log 1e-8, 20], as TRL. Shapes: (B, T) in, LossOut
    of (B, T); ratio = rho per token, detached; nothing is clipped; weight = phi A. A (B, T) advantage takes
    its sign per token (TRL's (B, 1) advantages give one per row). ``is_weight`` counts on valid tokens only.

    w = 1/2 with A = 1: phi = e^3 (1/4) e^(-1.5) = 1.1204; loss = -1.1204 * log(1/2) = 0.7766.

    >>> lp = torch.log(torch.tensor([[0.5]])); out = vespo(lp, torch.zeros(1, 1), torch.tensor([1.]), torch.ones(1, 1))
    >>> out.loss, out.weight
    (tensor([[0.7766]]), tensor([[1.1204]]))
    """
    A, m, valid = _prepare(logp, old_logp, adv, mask)
    log_rho = (logp - old_logp).detach().clamp(-20.0, 20.0)           # (B, T)
    log_w = (log_rho * m).sum(-1, keepdim=True)                        # (B, 1) sequence log-ratio
    if is_weight is not None:
        if is_weight.shape != logp.shape:
            raise ValueError(f"is_weight: expected shape {tuple(logp.shape)} like logp, got {tuple(is_weight.shape)}")
        log_is = torch.log(is_weight.detach().to(logp.dtype)).clamp(LOG_MIN, 20.0)  # log 0 -> log 1e-8
        log_w = log_w + (log_is * m).sum(-1, keepdim=True)
    log_w = log_w.clamp(LOG_MIN, 20.0)                                 # (B, 1)
    pos = A >= 0                                                       # (B, T)
    k = torch.where(pos, vespo_k_pos, vespo_k_neg).to(logp.dtype)
    lam = torch.where(pos, vespo_lambda_pos, vespo_lambda_neg).to(logp.dtype).clamp(min=1e-4)
    phi = torch.exp(lam + k * log_w - lam * log_w.exp()).nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)  # (B, T)
    none = torch.zeros_like(valid)
    return LossOut(-phi * A * logp * m, torch.exp(log_rho), none, none, phi * A * m)


vespo.folds_is_weight = True  # the Updater passes the rollout IS weights here instead of multiplying by them
vespo.vanishes_at_zero_adv = True  # -phi A logp: zero gradient where A = 0 (registry.vanishes_at_zero_adv)
