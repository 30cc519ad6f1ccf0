"""DPPO (Qi et al., "Rethinking the Trust Region in LLM Reinforcement Learning", arXiv 2602.04879).

PPO's ratio clip is a one-sample estimate of how far the policy moved: it over-restricts rare tokens
(a tiny probability doubling is a big ratio but a small move) and under-restricts likely ones. DPPO
masks a token out of the loss when an estimate of the *divergence* between the rollout policy mu and
the current policy pi at that position leaves a trust region of radius ``dppo_delta``, and only in
the direction A pushes (a token moving back toward mu always keeps its gradient):

    loss_t = -A sg(min(rho_t, dppo_cap)) logp_t  if the token is inside the trust region, else 0.

The truncated IS weight min(rho, C) corrects for mu != pi (``dppo_cap`` = C; 10.0 is the default in
the authors' verl fork, references use 3 to 1e4). Here mu is ``old_logp``, the rollout's log-prob.
weight = A min(rho, C) inside the region, 0 outside. ``clipped_high`` marks masked tokens with A > 0,
``clipped_low`` those with A < 0. The masks and the weight are constants (no gradient through them).

Three ways to estimate the divergence at a position, with p = pi(y_t) and mu = mu(y_t) of the sampled
token:
- Binary-TV (``dppo_tv``): collapse the vocabulary to {y_t, everything else}: TV = |p - mu|. Mask if
  A > 0 and p - mu > delta, or A <= 0 and p - mu < -delta. Paper delta 0.15.
- Binary-KL (``dppo_kl``): Bernoulli KL(mu || p) = mu log(mu/p) + (1-mu) log((1-mu)/(1-p)) > delta and
  p moved in A's direction (p > mu for A > 0, p < mu for A <= 0). Paper delta 0.05.
- Top-K (``dppo_topk_tv``, ``dppo_topk_kl``): the same test with TV or KL(mu || pi) computed over the
  rollout's K most likely tokens plus one "rest" bucket holding the remaining mass.

The delta values come from /work/shared/algorithms.md; the reference code lets delta differ above and
below (two fields), the paper's defaults are symmetric, so one ``dppo_delta`` here.
"""

from __future__ import annotations

import torch

from rlnb.algos.inputs import prepare_tokens as _prepare
from rlnb.algos.losses import POLICY_LOSSES, LossOut
from rlnb.core.checks import check_same_device, check_tensor


def _log1mexp(lp: torch.Tensor) -> torch.Tensor:
    """log(1 - exp(lp)) for lp <= 0, accurate near 0 and near -inf."""
    return torch.log(-torch.expm1(lp.clamp(max=-1e-12)))


def _masked_pg(logp, old_logp, A, valid, outside: torch.Tensor, dppo_cap: float) -> LossOut:
    ratio = torch.exp(logp - old_logp).detach()                        # (B, T)
    keep = (~outside & valid).to(logp.dtype)                           # (B, T) inside the trust region
    w = ratio.clamp(max=dppo_cap) * keep                               # (B, T) truncated IS weight
    low, high = outside & (A < 0) & valid, outside & (A > 0) & valid
    return LossOut(-A * w * logp, ratio, low, high, A * w)


def _moved_with_adv(logp, old_logp, A) -> torch.Tensor:
    """True where p moved the way A pushes it: p > mu for A > 0, p < mu for A <= 0."""
    return torch.where(A > 0, logp > old_logp, logp < old_logp)


@POLICY_LOSSES.register("dppo_tv")
def dppo_tv(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, *,
            dppo_delta: float = 0.15, dppo_cap: float = 10.0) -> LossOut:
    """DPPO Binary-TV (arXiv 2602.04879): mask if A > 0 and p - mu > delta, or A <= 0 and p - mu < -delta.

    Shapes: (B, T) in, LossOut (B, T) out. See the module docstring for the full loss.
    Below, p rose 0.5 -> 0.7 (0.2 > 0.15) for A > 0: masked; the same move for A < 0 is kept.

    >>> lp, mu = torch.log(torch.tensor([[0.7, 0.7]])), torch.log(torch.tensor([[0.5, 0.5]]))
    >>> out = dppo_tv(lp, mu, torch.tensor([[1., -1.]]), torch.ones(1, 2))
    >>> out.clipped_high, out.weight
    (tensor([[ True, False]]), tensor([[ 0.0000, -1.4000]]))
    """
    A, _, valid = _prepare(logp, old_logp, adv, mask)
    with torch.no_grad():
        diff = logp.exp() - old_logp.exp()                             # (B, T) p - mu
        outside = torch.where(A > 0, diff > dppo_delta, diff < -dppo_delta)
    return _masked_pg(logp, old_logp, A, valid, outside, dppo_cap)


def bernoulli_kl(old_logp: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    """KL(mu || p) between Bernoulli(mu) and Bernoulli(p), from log mu and log p. Same shape out.

    >>> bernoulli_kl(torch.log(torch.tensor([0.5])), torch.log(torch.tensor([0.5])))
    tensor([0.])
    """
    mu = old_logp.exp()
    return mu * (old_logp - logp) + (1 - mu) * (_log1mexp(old_logp) - _log1mexp(logp))


@POLICY_LOSSES.register("dppo_kl")
def dppo_kl(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, *,
            dppo_delta: float = 0.05, dppo_cap: float = 10.0) -> LossOut:
    """DPPO Binary-KL (arXiv 2602.04879): mask if KL(mu || p) > delta and p moved in A's direction.

    Shapes: (B, T) in, LossOut (B, T) out. Below, mu = 0.5 -> p = 0.7: KL = 0.5 ln(0.5/0.7) +
    0.5 ln(0.5/0.3) = 0.0872 > 0.05, so the A > 0 token is masked, the A < 0 one kept.

    >>> lp, mu = torch.log(torch.tensor([[0.7, 0.7]])), torch.log(torch.tensor([[0.5, 0.5]]))
    >>> dppo_kl(lp, mu, torch.tensor([[1., -1.]]), torch.ones(1, 2)).clipped_high
    tensor([[ True, False]])
    """
    A, _, valid = _prepare(logp, old_logp, adv, mask)
    with torch.no_grad():
        outside = (bernoulli_kl(old_logp, logp) > dppo_delta) & _moved_with_adv(logp, old_logp, A)
    return _masked_pg(logp, old_logp, A, valid, outside, dppo_cap)


def topk_divergence(topk_logp: torch.Tensor, old_topk_logp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """TV and KL(mu || pi) over the rollout's top-K tokens plus one "rest" bucket.

    topk_logp (..., K): log pi of the rollout's K most likely token ids; old_topk_logp (..., K): log mu of
    the same ids. Returns (tv, kl), each (...). The rest bucket holds 1 - sum of the K probabilities.

    >>> tv, kl = topk_divergence(torch.log(torch.tensor([[0.6, 0.2]])), torch.log(torch.tensor([[0.5, 0.3]])))
    >>> tv, kl  # TV = (|.6-.5| + |.2-.3| + |.2-.2|) / 2; KL = .5 ln(.5/.6) + .3 ln(.3/.2) + 0
    (tensor([0.1000]), tensor([0.0305]))
    """
    for name, x in (("topk_logp", topk_logp), ("old_topk_logp", old_topk_logp)):
        check_tensor(name, x, floating=True, finite=True)
    check_same_device(topk_logp=topk_logp, old_topk_logp=old_topk_logp)
    if topk_logp.shape != old_topk_logp.shape:
        raise ValueError(f"topk_logp, old_topk_logp: expected equal shapes, got {tuple(topk_logp.shape)} "
                         f"and {tuple(old_topk_logp.shape)}")
    p, mu = topk_logp.exp(), old_topk_logp.exp()                       # (..., K)
    p_rest = (1 - p.sum(-1)).clamp(min=1e-12)                          # (...)
    mu_rest = (1 - mu.sum(-1)).clamp(min=1e-12)
    tv = ((p - mu).abs().sum(-1) + (p_rest - mu_rest).abs()) / 2
    kl = (mu * (old_topk_logp - topk_logp)).sum(-1) + mu_rest * (mu_rest.log() - p_rest.log())
    return tv, kl


def _dppo_topk(logp, old_logp, adv, mask, topk_logp, old_topk_logp, which: int, delta: float,
               cap: float) -> LossOut:
    A, _, valid = _prepare(logp, old_logp, adv, mask)
    if topk_logp is None or old_topk_logp is None:
        raise ValueError("topk_logp, old_topk_logp: DPPO top-K needs both (B, T, K) tensors; the Sampler "
                         "must record the rollout's top-K ids and log-probs")
    check_tensor("topk_logp", topk_logp, floating=True)
    if topk_logp.dim() != 3 or topk_logp.shape[:-1] != logp.shape:
        raise ValueError(f"topk_logp: expected shape (B, T, K) with (B, T) = {tuple(logp.shape)}, "
                         f"got {tuple(topk_logp.shape)}")
    with torch.no_grad():
        div = topk_divergence(topk_logp, old_topk_logp)[which]        # (B, T)
        outside = (div > delta) & _moved_with_adv(logp, old_logp, A)
    return _masked_pg(logp, old_logp, A, valid, outside, cap)


@POLICY_LOSSES.register("dppo_topk_tv")
def dppo_topk_tv(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor,
                 topk_logp: torch.Tensor | None = None, old_topk_logp: torch.Tensor | None = None, *,
                 dppo_delta: float = 0.15, dppo_cap: float = 10.0) -> LossOut:
    """DPPO Top-K TV (arXiv 2602.04879): mask if TV over top-K + rest > delta and p moved with A.

    Extra inputs (B, T, K): ``old_topk_logp`` = the rollout's log-probs of its K most likely tokens
    (recorded by the Sampler with their ids), ``topk_logp`` = the current policy's log-probs of those
    same ids (the Updater gathers them from the new logits). Below, K = 1 and the one token plus
    the rest moved by 0.2 > 0.15 for A > 0: masked.

    >>> lp, mu = torch.log(torch.tensor([[0.7]])), torch.log(torch.tensor([[0.5]]))
    >>> dppo_topk_tv(lp, mu, torch.tensor([1.]), torch.ones(1, 1), lp[..., None], mu[..., None]).clipped_high
    tensor([[True]])
    """
    return _dppo_topk(logp, old_logp, adv, mask, topk_logp, old_topk_logp, 0, dppo_delta, dppo_cap)


@POLICY_LOSSES.register("dppo_topk_kl")
def dppo_topk_kl(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor,
                 topk_logp: torch.Tensor | None = None, old_topk_logp: torch.Tensor | None = None, *,
                 dppo_delta: float = 0.05, dppo_cap: float = 10.0) -> LossOut:
    """DPPO Top-K KL (arXiv 2602.04879): mask if KL(mu || pi) over top-K + rest > delta and p moved with A.

    Extra inputs as in ``dppo_topk_tv``. With K = 1 this is Binary-KL: mu 0.5 -> p 0.7 gives 0.0872.

    >>> lp, mu = torch.log(torch.tensor([[0.7]])), torch.log(torch.tensor([[0.5]]))
    >>> dppo_topk_kl(lp, mu, torch.tensor([1.]), torch.ones(1, 1), lp[..., None], mu[..., None]).weight
    tensor([[0.]])
    """
    return _dppo_topk(logp, old_logp, adv, mask, topk_logp, old_topk_logp, 1, dppo_delta, dppo_cap)


dppo_topk_tv.extra_inputs = dppo_topk_kl.extra_inputs = ("topk_logp", "old_topk_logp")
# -A w logp with a 0/1 trust-region mask w: zero gradient where A = 0 (registry.vanishes_at_zero_adv)
dppo_tv.vanishes_at_zero_adv = dppo_kl.vanishes_at_zero_adv = True
dppo_topk_tv.vanishes_at_zero_adv = dppo_topk_kl.vanishes_at_zero_adv = True
