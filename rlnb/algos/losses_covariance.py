"""Clip-Cov and KL-Cov (Cui et al., "The Entropy Mechanism of Reinforcement Learning for Reasoning
Language Models", arXiv 2505.22617).

Under a policy-gradient update, the entropy of a token's distribution falls when the sampled token was
already likely *and* had a high advantage: the entropy change is driven by the covariance between
log pi(y_t) and A_t. Both methods score every valid token of the (mini-)batch by its centred product

    Cov_t = (A_t - mean A) (logp_t - mean logp)          means over the batch's valid tokens, detached

and restrain the few tokens with a large one, n = max(1, int(ratio * N)) of the N valid tokens:

- **Clip-Cov** (``clip_cov``): PPO's clipped loss; in addition, n of the tokens PPO did not clip whose
  Cov lies strictly inside (``clip_cov_lb``, ``clip_cov_ub``) lose their gradient (loss 0).
- **KL-Cov** (``kl_cov``): no clip; the n tokens with the largest Cov get a penalty
  ``kl_cov_coef * |logp - old_logp|`` added to -A rho, pulling them back toward the rollout policy.

Defaults follow the authors' code: clip_cov_ratio 2e-4 with bounds (1, 5), kl_cov_ratio 2e-4 with
coefficient 1 (verl 0.9.1's config sets its ``ppo_kl_coef`` to 0.1: pass ``kl_cov_coef=0.1`` to match a
verl run). On a toy batch of a few hundred tokens that is n = 1 token per batch; raise the ratio to see
an effect (the paper's models see ~10^6 tokens per batch). verl calls the KL-Cov
coefficient ``ppo_kl_coef``; TRL has neither loss.

Which Clip-Cov tokens: the paper and verl draw the n tokens *uniformly at random* from the band
(``torch.randperm`` on the global stream). Here the draw is explicit: pass a ``torch.Generator`` as
``generator`` to get the paper's uniform draw from that stream; without one (the default) the choice
is deterministic, the n band tokens with the *largest* Cov (ties broken by position), so a run is
reproducible without a hidden random stream. KL-Cov's choice (top-n) is deterministic in both.
"""

from __future__ import annotations

import torch

from rlnb.algos.inputs import no_tokens as _none
from rlnb.algos.inputs import prepare_tokens as _prepare
from rlnb.algos.losses import POLICY_LOSSES, LossOut, ppo_clip


def token_cov(logp: torch.Tensor, A: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """(B, T) centred product (A_t - mean A)(logp_t - mean logp) over the valid tokens; -inf elsewhere.

    >>> token_cov(torch.tensor([[0., -2.]]), torch.tensor([[1., -1.]]), torch.ones(1, 2, dtype=torch.bool))
    tensor([[1., 1.]])
    """
    lp, a = logp.detach(), A.detach()
    n = valid.sum().clamp(min=1)
    cov = (a - a[valid].sum() / n) * (lp - lp[valid].sum() / n)      # (B, T)
    return cov.masked_fill(~valid, float("-inf"))


def _budget(ratio: float, valid: torch.Tensor, name: str) -> int:
    """n = max(1, int(ratio * N)) tokens (0 when nothing is valid)."""
    if not 0 < ratio <= 1:
        raise ValueError(f"{name}: expected a fraction in (0, 1], got {ratio!r}")
    n_valid = int(valid.sum())
    return min(max(1, int(ratio * n_valid)), n_valid)


def _top(score: torch.Tensor, candidates: torch.Tensor, n: int) -> torch.Tensor:
    """(B, T) bool: the n candidates with the largest score (fewer if there are fewer candidates)."""
    flat = score.masked_fill(~candidates, float("-inf")).flatten()
    k = min(n, int(candidates.sum()))
    order = torch.sort(flat, descending=True, stable=True).indices     # stable: ties go to the lowest index
    chosen = torch.zeros_like(candidates).flatten()
    chosen[order[:k]] = True
    return chosen.view_as(candidates)


def _uniform(candidates: torch.Tensor, n: int, generator: torch.Generator) -> torch.Tensor:
    """(B, T) bool: n candidates drawn uniformly without replacement from ``generator``'s stream."""
    idx = torch.nonzero(candidates.flatten()).flatten()                # (C,)
    perm = torch.randperm(len(idx), generator=generator, device=generator.device).to(idx.device)
    chosen = torch.zeros_like(candidates).flatten()
    chosen[idx[perm[:n]]] = True
    return chosen.view_as(candidates)


@POLICY_LOSSES.register("clip_cov")
def clip_cov(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor,
             generator: torch.Generator | None = None, *, eps_low: float = 0.2, eps_high: float = 0.2,
             clip_cov_ratio: float = 2e-4, clip_cov_lb: float = 1.0, clip_cov_ub: float = 5.0) -> LossOut:
    """Clip-Cov (arXiv 2505.22617): PPO clip, and n band tokens of high covariance lose their gradient.

    loss_t = ppo_clip_t * (1 - D_t),  D = n tokens PPO left unclipped with clip_cov_lb < Cov_t < clip_cov_ub,
    n = max(1, int(clip_cov_ratio * N)). Shapes: (B, T) in, LossOut (B, T) out. weight = ppo_clip's weight
    outside D, 0 on D; D joins the clip masks (high if A > 0, low if A < 0). ``generator`` (optional,
    positional-or-keyword): None picks the n largest Cov in the band (deterministic), a generator draws
    them uniformly as the paper does (see the module docstring).

    Log-probs [0, -1, -2] (on-policy) with A = [2, 0, -1]: mean A = 1/3, mean logp = -1, so Cov = [5/3, 0, 4/3].
    Tokens 0 and 2 are in the band (1, 5); n = int(0.34 * 3) = 1, the largest (token 0) is detached.

    >>> lp = torch.tensor([[0., -1., -2.]])
    >>> out = clip_cov(lp, lp, torch.tensor([[2., 0., -1.]]), torch.ones(1, 3), clip_cov_ratio=0.34)
    >>> out.weight, out.clipped_high
    (tensor([[ 0.,  0., -1.]]), tensor([[ True, False, False]]))
    """
    if not clip_cov_lb < clip_cov_ub:
        raise ValueError(f"clip_cov_lb: expected less than clip_cov_ub={clip_cov_ub}, got {clip_cov_lb}")
    ppo = ppo_clip(logp, old_logp, adv, mask, eps_low=eps_low, eps_high=eps_high)
    A, m, valid = _prepare(logp, old_logp, adv, mask)
    with torch.no_grad():
        cov = token_cov(logp, A, valid)                                # (B, T)
        band = valid & ~(ppo.clipped_low | ppo.clipped_high) & (cov > clip_cov_lb) & (cov < clip_cov_ub)
        n = _budget(clip_cov_ratio, valid, "clip_cov_ratio")
        cut = _top(cov, band, n) if generator is None else _uniform(band, n, generator)  # (B, T) D
    keep = (~cut).to(logp.dtype)
    low, high = ppo.clipped_low | (cut & (A < 0)), ppo.clipped_high | (cut & (A > 0))
    return LossOut(ppo.loss * keep, ppo.ratio, low, high, ppo.weight * keep)


@POLICY_LOSSES.register("kl_cov")
def kl_cov(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, *,
           kl_cov_ratio: float = 2e-4, kl_cov_coef: float = 1.0) -> LossOut:
    """KL-Cov (arXiv 2505.22617): -A rho, plus kl_cov_coef |log rho| on the n largest-covariance tokens.

    loss_t = -A rho_t + kl_cov_coef |logp_t - old_logp_t| K_t,  K = the n = max(1, int(kl_cov_ratio * N))
    valid tokens with the largest Cov. Shapes: (B, T) in, LossOut (B, T) out. No clip (both masks all
    False). weight = A rho - kl_cov_coef sign(log rho) K: at rho = 1 the penalty's gradient is 0 (the
    gradient of |x| at 0), so on-policy this is exactly REINFORCE; it bites once the ratio leaves 1.

    Below, Cov = [1.33, 1.17, 0] (current log-probs [0.5, -2, -1], A = [2, 0, 1]) and n = 1: the first
    token gets the penalty; its log-ratio 0.5 adds 0.5 to its loss and -1 to its weight.

    >>> lp = torch.tensor([[0.5, -2., -1.]]); old = torch.tensor([[0., -2., -1.]])
    >>> out = kl_cov(lp, old, torch.tensor([[2., 0., 1.]]), torch.ones(1, 3), kl_cov_ratio=0.34)
    >>> out.loss, out.weight
    (tensor([[-2.7974,  0.0000, -1.0000]]), tensor([[2.2974, 0.0000, 1.0000]]))
    """
    A, m, valid = _prepare(logp, old_logp, adv, mask)
    d = logp - old_logp                                                # (B, T) log rho
    ratio = torch.exp(d)
    with torch.no_grad():
        K = _top(token_cov(logp, A, valid), valid, _budget(kl_cov_ratio, valid, "kl_cov_ratio"))  # (B, T)
    k = K.to(logp.dtype)
    loss = (-A * ratio + kl_cov_coef * d.abs() * k) * m
    weight = ((A * ratio - kl_cov_coef * torch.sign(d) * k) * m).detach()
    return LossOut(loss, ratio.detach(), _none(valid), _none(valid), weight)

# Clip-Cov is PPO's loss times a 0/1 mask: zero gradient where A = 0 (``registry.vanishes_at_zero_adv``). KL-Cov is
# not: its penalty may pick a token with A = 0 (its covariance with the batch's mean advantage can be large).
clip_cov.vanishes_at_zero_adv = True
