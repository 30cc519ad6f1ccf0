"""Rollout correction: the policy that sampled is not exactly the policy being trained.

A fast inference engine samples in lower precision, with other kernels, sometimes with stale weights; the
trainer then scores the same tokens again. mu(o_t) (``rollout_logp``, what the sampler computed) and
pi_old(o_t) (``old_logp``, the trainer's recompute) differ, so "on-policy" data is slightly off-policy and
the PPO ratio pi / pi_old does not see it. These entries reweight or drop tokens by the rollout ratio

    r_t = pi_train(o_t) / mu(o_t) = exp(train_logp - rollout_logp),

following verl 0.9.1's ``rollout_corr_helper`` (truncated IS, rejection by a divergence) and TRL 1.16's
``vllm_importance_sampling_mode`` and off-policy sequence mask (DeepSeek-V3.2, arXiv 2512.02556). Background:
Yao et al., "Your efficient RL framework secretly brings you off-policy RL training" (2025), and Liu et
al., "When Speed Kills Stability: Demystifying RL Collapse from the Training-Inference Mismatch" (2025).

Every entry of ``ROLLOUT_CORRECTIONS`` has the signature
``fn(logp, train_logp, rollout_logp, adv, mask, *, <hyper>) -> Correction`` on (B, T) tensors (``adv`` (B,)
or (B, T)): ``logp`` the current policy (detached), ``train_logp`` the trainer's log-probs the ratio compares
with mu (pi_old; in bypass mode the current policy, as verl), ``rollout_logp`` mu. A Correction carries three
(B, T) detached factors, composed over the recipe's ``rollout_correction`` names by product:

- ``is_weight``: multiplies the per-token policy loss (TRL's ``importance_sampling_ratio``, verl's
  ``rollout_is_weights``); a loss that folds it in itself (VESPO) receives it instead;
- ``gate``: multiplies the per-token policy loss too, but is no IS weight (TRL's off-policy sequence mask);
- ``keep``: 0 removes the token from the loss *and* its denominators (verl's rejection sampling).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from rlnb.algos.inputs import check_mask
from rlnb.algos.kl import KL_ESTIMATORS
from rlnb.algos.registry import Registry

ROLLOUT_CORRECTIONS = Registry("rollout correction")
SAFETY_BOUND = 20.0  # verl clamps log-ratios to [-20, 20] before exp: weights stay finite


class Correction(NamedTuple):
    is_weight: torch.Tensor  # (B, T) multiplies the per-token policy loss (or is folded in by the loss)
    gate: torch.Tensor       # (B, T) 0/1, multiplies the per-token policy loss, denominators kept
    keep: torch.Tensor       # (B, T) 0/1, 0 drops the token from every term and its denominators


def _ones(mask: torch.Tensor) -> torch.Tensor:
    return torch.ones_like(mask, dtype=torch.float32 if not mask.is_floating_point() else mask.dtype)


def _log_ratio(train_logp, rollout_logp, mask) -> torch.Tensor:
    """(B, T) log(pi_train / mu) on valid tokens, 0 on padding; checked shapes, no gradient."""
    if rollout_logp is None:
        raise ValueError("rollout_logp: a rollout correction needs the sampler's own log-probs "
                         "(batch.rollout_logp, written by the Sampler), got None")
    for name, x in (("train_logp", train_logp), ("rollout_logp", rollout_logp)):
        if x.shape != mask.shape:
            raise ValueError(f"{name}: expected shape {tuple(mask.shape)} like mask, got {tuple(x.shape)}")
    check_mask(mask)
    return ((train_logp - rollout_logp) * mask).detach()


def _bounds(rollout_is_min, rollout_is_max) -> tuple[float, float]:
    for name, v in (("rollout_is_min", rollout_is_min), ("rollout_is_max", rollout_is_max)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0):
            raise ValueError(f"{name}: expected a positive number or None, got {v!r}")
    lo = 0.0 if rollout_is_min is None else float(rollout_is_min)
    hi = math.inf if rollout_is_max is None else float(rollout_is_max)
    if lo > hi:
        raise ValueError(f"rollout_is_min: expected at most rollout_is_max={hi}, got {lo}")
    return lo, hi


def _seq(log_ratio: torch.Tensor) -> torch.Tensor:
    """(B, T) -> (B, 1): the sequence ratio's log, sum_t log r_t (TRL and verl both sum, not average)."""
    return log_ratio.sum(-1, keepdim=True)


def _weight(log_r: torch.Tensor, mask: torch.Tensor, lo: float, hi: float, truncate: bool) -> torch.Tensor:
    r = torch.exp(log_r.clamp(-SAFETY_BOUND, SAFETY_BOUND))           # (B, T) or (B, 1)
    w = r.clamp(lo, hi) if truncate else torch.where((r >= lo) & (r <= hi), r, torch.zeros_like(r))
    return (w * mask).to(mask.dtype if mask.is_floating_point() else torch.float32)  # (B, T), 0 on padding


def _is_correction(log_r, mask, rollout_is_min, rollout_is_max, *, truncate: bool) -> Correction:
    lo, hi = _bounds(rollout_is_min, rollout_is_max)
    return Correction(_weight(log_r, mask, lo, hi, truncate), _ones(mask), _ones(mask))


# Shared by the four IS entries: bounds ``rollout_is_min`` C_min (None: none) and ``rollout_is_max`` C_max
# (TRL's default 3.0; verl's ``rollout_is_threshold`` defaults to 2.0, with no lower bound). Log-ratios are
# clamped to [-20, 20] before exp (verl's safety bound; TRL has none: only a ratio beyond e^20 with C_max
# None differs). Shapes (B, T) -> Correction of (B, T), 0 on padding; gate and keep are 1. The examples:
# rollout mu = [.5, .5 | .5, .5], trainer's pi = [.5, .25 | .5, .5], C_min = 0.6.


@ROLLOUT_CORRECTIONS.register("token_truncate")
def token_truncate(logp, train_logp, rollout_logp, adv, mask, *, rollout_is_min: float | None = None,
                   rollout_is_max: float | None = 3.0) -> Correction:
    """Token-level truncated importance sampling, TIS (Yao et al. 2025; truncated IS as in IMPALA's V-trace,
    arXiv 1802.01561; TRL 1.16's ``vllm_importance_sampling_mode="token_truncate"``, verl 0.9.1's
    ``rollout_is="token"``): r_t = pi_train(o_t) / mu(o_t),
    is_weight_t = clamp(r_t, C_min, C_max), detached. r = [1, .5 | 1, 1]: 0.5 is truncated up to 0.6.

    >>> mu = torch.full((2, 2), 0.5).log(); pi = torch.tensor([[0.5, 0.25], [0.5, 0.5]]).log()
    >>> token_truncate(pi, pi, mu, torch.ones(2), torch.ones(2, 2), rollout_is_min=0.6).is_weight
    tensor([[1.0000, 0.6000],
            [1.0000, 1.0000]])
    """
    log_r = _log_ratio(train_logp, rollout_logp, mask)                # (B, T)
    return _is_correction(log_r, mask, rollout_is_min, rollout_is_max, truncate=True)


@ROLLOUT_CORRECTIONS.register("token_mask")
def token_mask(logp, train_logp, rollout_logp, adv, mask, *, rollout_is_min: float | None = None,
               rollout_is_max: float | None = 3.0) -> Correction:
    """Token-level masked importance sampling (IcePop, Ring-1T, arXiv 2510.18855; TRL 1.16's ``"token_mask"``):
    is_weight_t = r_t where
    C_min <= r_t <= C_max, else 0 (the token stays in the denominators). r = .5 < C_min: weight 0.

    >>> mu = torch.full((2, 2), 0.5).log(); pi = torch.tensor([[0.5, 0.25], [0.5, 0.5]]).log()
    >>> token_mask(pi, pi, mu, torch.ones(2), torch.ones(2, 2), rollout_is_min=0.6).is_weight
    tensor([[1., 0.],
            [1., 1.]])
    """
    log_r = _log_ratio(train_logp, rollout_logp, mask)                # (B, T)
    return _is_correction(log_r, mask, rollout_is_min, rollout_is_max, truncate=False)


@ROLLOUT_CORRECTIONS.register("sequence_truncate")
def sequence_truncate(logp, train_logp, rollout_logp, adv, mask, *, rollout_is_min: float | None = None,
                      rollout_is_max: float | None = 3.0) -> Correction:
    """Sequence-level truncated IS (truncated IS of IMPALA, arXiv 1802.01561, on the sequence ratio; TRL
    1.16's ``"sequence_truncate"``, verl 0.9.1's ``rollout_is=
    "sequence"``): r_i = prod_t pi_train / mu = exp(sum_t log r_t), one weight clamp(r_i, C_min, C_max) on
    every token of row i. Row 0's r = .5 is truncated to 0.6 on both its tokens.

    >>> mu = torch.full((2, 2), 0.5).log(); pi = torch.tensor([[0.5, 0.25], [0.5, 0.5]]).log()
    >>> sequence_truncate(pi, pi, mu, torch.ones(2), torch.ones(2, 2), rollout_is_min=0.6).is_weight
    tensor([[0.6000, 0.6000],
            [1.0000, 1.0000]])
    """
    log_r = _seq(_log_ratio(train_logp, rollout_logp, mask))          # (B, 1)
    return _is_correction(log_r, mask, rollout_is_min, rollout_is_max, truncate=True)


@ROLLOUT_CORRECTIONS.register("sequence_mask")
def sequence_mask(logp, train_logp, rollout_logp, adv, mask, *, rollout_is_min: float | None = None,
                  rollout_is_max: float | None = 3.0) -> Correction:
    """Sequence-level masked IS, MIS (Liu et al. 2025, "When Speed Kills Stability"; the sequence form of
    IcePop's masking, arXiv 2510.18855; TRL 1.16's default ``vllm_importance_sampling_mode``): is_weight = r_i
    on every token of row i when C_min <= r_i <= C_max, else 0. Row 0 (r = .5) is masked out whole.

    >>> mu = torch.full((2, 2), 0.5).log(); pi = torch.tensor([[0.5, 0.25], [0.5, 0.5]]).log()
    >>> sequence_mask(pi, pi, mu, torch.ones(2), torch.ones(2, 2), rollout_is_min=0.6).is_weight
    tensor([[0., 0.],
            [1., 1.]])
    """
    log_r = _seq(_log_ratio(train_logp, rollout_logp, mask))          # (B, 1)
    return _is_correction(log_r, mask, rollout_is_min, rollout_is_max, truncate=False)


# --- rejection (verl's rollout_rs): drop tokens or whole sequences far from the rollout policy ---------
def _divergence(train_logp, rollout_logp, mask, rollout_rs_estimator: str, rollout_rs_threshold):
    """Per-token divergence of mu from pi_train, d_t = k(rollout_logp, train_logp) with a KL_ESTIMATORS entry
    (k1 = log mu - log pi_train, verl's token_k1; k2; k3 = r - 1 - log r), and its bounds: a signed estimator
    (k1) keeps [-log C, log C] (verl's "C" reads as ratio bounds 1/C and C), the others [0, C]."""
    if rollout_rs_threshold is None:
        raise ValueError("rollout_rs_threshold: a rejection entry needs its threshold and has no default (verl "
                         "0.9.1 raises too); set it, e.g. rollout_rs_threshold=2.0 for k1 or 0.01 for k3")
    if isinstance(rollout_rs_threshold, bool) or not isinstance(rollout_rs_threshold, (int, float)) \
            or not rollout_rs_threshold > 0:
        raise ValueError(f"rollout_rs_threshold: expected a positive number, got {rollout_rs_threshold!r}")
    est = KL_ESTIMATORS[rollout_rs_estimator]
    log_r = _log_ratio(train_logp, rollout_logp, mask).clamp(-SAFETY_BOUND, SAFETY_BOUND)  # (B, T)
    d = est(-log_r, torch.zeros_like(log_r)) * mask                   # (B, T) logp - ref = log mu - log pi
    signed = bool(est(torch.tensor(-1.0), torch.tensor(0.0)) < 0)
    hi = math.log(rollout_rs_threshold) if signed else float(rollout_rs_threshold)
    return d, (-hi if signed else -math.inf), hi


def _keep(stat: torch.Tensor, lo: float, hi: float, mask: torch.Tensor) -> Correction:
    keep = ((stat >= lo) & (stat <= hi)).to(_ones(mask).dtype).expand(mask.shape)  # (B, T)
    return Correction(_ones(mask), _ones(mask), keep * mask + (1 - mask))  # padding is left as it was


@ROLLOUT_CORRECTIONS.register("token_reject")
def token_reject(logp, train_logp, rollout_logp, adv, mask, *, rollout_rs_estimator: str = "k3",
                 rollout_rs_threshold: float | None = None) -> Correction:
    """Token-level rejection sampling (a hard trust region on the train/rollout divergence, as IcePop's
    masking, arXiv 2510.18855; verl 0.9.1's ``rollout_rs="token_k1|k2|k3"``): keep token t when its
    divergence d_t = k(mu, pi_train) is within the threshold C (k1: -log C <= log mu/pi <= log C; k2, k3:
    d_t <= C); a rejected token leaves the loss and its denominators (keep = 0). No default C, as in verl.
    mu = [.5, .5], pi = [.5, .25]: k3 of the second token is .5 - 1 + log 2 = 0.193 > C = 0.1.

    >>> mu = torch.full((1, 2), 0.5).log(); pi = torch.tensor([[0.5, 0.25]]).log()
    >>> token_reject(pi, pi, mu, torch.ones(1), torch.ones(1, 2), rollout_rs_threshold=0.1).keep
    tensor([[1., 0.]])
    """
    d, lo, hi = _divergence(train_logp, rollout_logp, mask, rollout_rs_estimator, rollout_rs_threshold)
    return _keep(d, lo, hi, mask)


# a row's divergence from its tokens' (B, T) -> (B, 1), verl's seq_sum / seq_mean / seq_max
SEQUENCE_REDUCTIONS = {
    "sum": lambda d, mask: d.sum(-1, keepdim=True),
    "mean": lambda d, mask: d.sum(-1, keepdim=True) / mask.sum(-1, keepdim=True).clamp(min=1),
    "max": lambda d, mask: d.masked_fill(mask == 0, 0.0).amax(-1, keepdim=True),  # d >= 0 for k2, k3
}


@ROLLOUT_CORRECTIONS.register("sequence_reject")
def sequence_reject(logp, train_logp, rollout_logp, adv, mask, *, rollout_rs_estimator: str = "k3",
                    rollout_rs_threshold: float | None = None, rollout_rs_reduce: str = "mean") -> Correction:
    """Sequence-level rejection sampling (verl 0.9.1's ``rollout_rs="seq_{sum,mean,max}_k*"``; the sequence
    form of IcePop's masking, arXiv 2510.18855): the row's
    divergence D_i = sum, mean or max over its valid tokens of d_t (``rollout_rs_reduce``) against C as in
    ``token_reject``; a rejected row leaves the loss whole. Means over [.193, 0] and [0, 0]: row 0 (0.097)
    is rejected at C = 0.05 (k1 and max as in verl: max takes k2 or k3 only).

    >>> mu = torch.full((2, 2), 0.5).log(); pi = torch.tensor([[0.5, 0.25], [0.5, 0.5]]).log()
    >>> sequence_reject(pi, pi, mu, torch.ones(2), torch.ones(2, 2), rollout_rs_threshold=0.05).keep
    tensor([[0., 0.],
            [1., 1.]])
    """
    d, lo, hi = _divergence(train_logp, rollout_logp, mask, rollout_rs_estimator, rollout_rs_threshold)
    if rollout_rs_reduce not in SEQUENCE_REDUCTIONS or (rollout_rs_reduce == "max" and lo != -math.inf):
        raise ValueError(f"rollout_rs_reduce: expected one of {sorted(SEQUENCE_REDUCTIONS)} (max with a non-negative "
                         f"estimator: k2, k3), got {rollout_rs_reduce!r} with {rollout_rs_estimator!r}")
    D = SEQUENCE_REDUCTIONS[rollout_rs_reduce](d, mask)                # (B, 1)
    return _keep(D, lo, hi, mask)


@ROLLOUT_CORRECTIONS.register("off_policy_mask")
def off_policy_mask(logp, train_logp, rollout_logp, adv, mask, *,
                    off_policy_mask_threshold: float | None = None) -> Correction:
    """Off-policy sequence mask (DeepSeek-V3.2, arXiv 2512.02556, eq. 9; TRL 1.16's
    ``off_policy_mask_threshold``): drop a sequence with a negative advantage whose mean KL from the rollout
    policy, KL_i = mean_t (log mu - log pi_theta), exceeds delta; gate_i = 1[A_i >= 0 or KL_i <= delta].

    A negative advantage on a sequence the current policy has already moved away from would push it
    further, on samples that no longer describe the policy. The gate multiplies the per-token policy loss
    (the denominators keep the row, as TRL). mu is the sampler's ``rollout_logp`` (TRL's vLLM log-probs;
    without vLLM TRL uses old_logp, which rlnb's sampler matches up to rounding). No default delta: TRL
    has none (None switches it off; its docs suggest 0.5). A = -1 and KL = log 2 > 0.5 drop row 0.

    >>> mu = torch.full((2, 1), 0.5).log(); pi = torch.tensor([[0.25], [0.25]]).log()
    >>> off_policy_mask(pi, pi, mu, torch.tensor([-1., 1.]), torch.ones(2, 1), off_policy_mask_threshold=0.5).gate
    tensor([[0.],
            [1.]])
    """
    if isinstance(off_policy_mask_threshold, bool) or not isinstance(off_policy_mask_threshold, (int, float)):
        raise ValueError(f"off_policy_mask_threshold: the correction 'off_policy_mask' needs its KL threshold "
                         f"delta (no default, as in TRL; e.g. 0.5), got {off_policy_mask_threshold!r}")
    kl = -_log_ratio(logp, rollout_logp, mask)                        # (B, T) log mu - log pi_theta
    seq_kl = kl.sum(-1, keepdim=True) / mask.sum(-1, keepdim=True).clamp(min=1)  # (B, 1)
    A = adv.detach()[:, :1] if adv.dim() == 2 else adv.detach()[:, None]  # (B, 1) the row's sign
    gate = ((A >= 0) | (seq_kl <= off_policy_mask_threshold)).to(_ones(mask).dtype).expand(mask.shape)
    return Correction(_ones(mask), gate.clone(), _ones(mask))


# --- composition and the importance-corrected KL -----------------------------------------------------
def compose(corrections, logp, train_logp, rollout_logp, adv, mask) -> Correction:
    """The product of the bound ``corrections`` (each field multiplied), all ones when there are none."""
    ones = _ones(mask)
    out = Correction(ones, ones, ones)
    for fn in corrections:
        c = fn(logp.detach(), train_logp.detach(), rollout_logp, adv, mask)
        out = Correction(out.is_weight * c.is_weight, out.gate * c.gate, out.keep * c.keep)
    return out


def importance_corrected_kl(kl: torch.Tensor, logp: torch.Tensor, old_logp: torch.Tensor) -> torch.Tensor:
    """The KL term times the policy ratio, k3_t * pi_theta / pi_old (DeepSeek-V3.2, arXiv 2512.02556; TRL
    1.16's ``use_bias_correction_kl``, its default). The samples come from pi_old, so E_old[rho k3] is the
    KL of pi_theta; the ratio keeps its gradient (at rho = 1 its value is 1, its gradient is not 0).
    verl's KL loss has no such factor. kl, logp, old_logp (B, T) -> (B, T).

    >>> kl = torch.tensor([[0.1, 0.2]]); lp = torch.tensor([[0.0, -0.5]]); old = torch.tensor([[0.0, 0.0]])
    >>> importance_corrected_kl(kl, lp, old)
    tensor([[0.1000, 0.1213]])
    """
    return kl * torch.exp(logp - old_logp)


def correction_metrics(c: Correction, m: torch.Tensor) -> dict[str, float]:
    """TRL's ``sampling/importance_sampling_ratio/{min,mean,max}`` over the valid tokens, and the shares
    of valid tokens gated or rejected."""
    valid = m.bool()
    if not valid.any():
        return {}
    w = c.is_weight[valid]
    return {"sampling/importance_sampling_ratio/min": float(w.min()),
            "sampling/importance_sampling_ratio/mean": float(w.mean()),
            "sampling/importance_sampling_ratio/max": float(w.max()),
            "rollout_corr/gated_fraction": float((c.gate[valid] == 0).float().mean()),
            "rollout_corr/rejected_fraction": float((c.keep[valid] == 0).float().mean())}
