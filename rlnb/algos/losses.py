"""Per-token policy losses. Each returns the per-token loss and what the widgets need to see.

Signature: ``fn(logp, old_logp, adv, mask, *, <hyper>) -> LossOut`` on ``(B, T)`` tensors
(``adv`` may be ``(B,)``; it is broadcast over tokens and treated as a constant). The loss is
*minimised* (= -objective). Aggregation to a scalar is a separate step (``rlnb.algos.aggregation``).
``old_logp`` is the rollout policy's log-prob of the sampled token (the Sampler records it).

Losses that need more than these four tensors take them as optional *positional-or-keyword* arguments
after ``mask`` (so they are not mistaken for hyperparameters) and list their names in
``fn.extra_inputs``; ``extra_inputs(fn)`` reads it (DPPO top-K's). Clip-Cov's optional ``generator`` sits
there too but is no extra input: nothing passes it in a Trainer, so its token choice is deterministic.

What ``clipped_low`` / ``clipped_high`` mean, per loss (always False where mask is 0):

=========== ===================================================================================
pg          never clipped: all False
ppo_clip    TRL's clip_ratio/low and /high: rho < 1-eps_low with A < 0, rho > 1+eps_high with A > 0;
            with dual-clip, tokens with A < 0 and rho > dual_clip_c are also in ``clipped_high``.
            Exactly the tokens whose gradient is cut (weight 0).
cispo       the IS weight was truncated: rho below 1-eps_low (low) or above the cap (high), for any
            sign of A. The gradient still flows, scaled by the truncated weight.
gspo        like ppo_clip, but on the sequence ratio s_i (every valid token of the sequence).
geo_mean    like ppo_clip, per token, in log space: log rho > eps_high with A > 0 (high), log rho < -eps_low
            with A < 0 (low). Exactly the tokens left out of the geometric mean's gradient.
clip_cov    ppo_clip's tokens, plus the tokens the covariance rule detaches (high if A > 0, low if A < 0).
kl_cov      never clipped: all False (the selected tokens get a penalty, not a cut).
sapo        no hard clip: all False (the soft gate shrinks the weight smoothly instead).
dppo_*      the token is masked out of the trust region: high when A > 0, low when A < 0.
=========== ===================================================================================
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from rlnb.algos.inputs import no_tokens as _none
from rlnb.algos.inputs import prepare_tokens as _prepare
from rlnb.algos.registry import Registry, extra_inputs  # noqa: F401  (extra_inputs: the old import path)

POLICY_LOSSES = Registry("policy loss")


class LossOut(NamedTuple):
    loss: torch.Tensor          # (B, T) per-token loss, zero where mask is 0
    ratio: torch.Tensor         # (B, T) rho = exp(logp - old_logp), detached (GSPO: the sequence ratio s_i)
    clipped_low: torch.Tensor   # (B, T) bool: PPO: rho < 1 - eps_low and A < 0 (TRL's clip_ratio/low); see table
    clipped_high: torch.Tensor  # (B, T) bool: PPO: rho > 1 + eps_high and A > 0 (TRL's clip_ratio/high); see table
    weight: torch.Tensor        # (B, T) -d loss / d logp, detached: the per-token weight on grad logp


@POLICY_LOSSES.register("pg")
def pg(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor) -> LossOut:
    """Vanilla policy gradient / REINFORCE (Williams 1992): loss_t = -A logp_t.

    No ratio, no clip (RLOO's original loss). weight = A. Its gradient equals ppo_clip's at ratio 1;
    its *value* does not (it is -A logp, not -A). Nothing is ever clipped.

    >>> out = pg(torch.log(torch.tensor([[0.5, 0.25]])), torch.zeros(1, 2), torch.tensor([2.]), torch.ones(1, 2))
    >>> out.loss, out.weight
    (tensor([[1.3863, 2.7726]]), tensor([[2., 2.]]))
    """
    A, m, valid = _prepare(logp, old_logp, adv, mask)
    ratio = torch.exp(logp - old_logp).detach()
    return LossOut(-A * logp * m, ratio, _none(valid), _none(valid), A * m)


@POLICY_LOSSES.register("ppo_clip")
def ppo_clip(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    adv: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    dual_clip_c: float | None = None,
) -> LossOut:
    """PPO clipped surrogate (Schulman et al. 2017, arXiv 1707.06347), asymmetric bounds as in DAPO.

    loss_t = max(-A rho_t, -A clip(rho_t, 1 - eps_low, 1 + eps_high)),  rho_t = exp(logp_t - old_logp_t)
    Dual-clip (Ye et al. 2020, arXiv 1912.09729), on when ``dual_clip_c`` is a float c > 1: for A < 0,
    loss_t = min(that, -A c), so a token whose ratio exploded cannot dominate (verl uses c = 3).
    TRL names: ``epsilon`` (= eps_low) and ``epsilon_high``. weight = A rho where not clipped, else 0.

    >>> lp = torch.log(torch.tensor([[1.5, 0.5]])); out = ppo_clip(lp, torch.zeros(1, 2), torch.tensor([1.]), torch.ones(1, 2))
    >>> out.loss, out.clipped_high
    (tensor([[-1.2000, -0.5000]]), tensor([[ True, False]]))
    >>> ppo_clip(torch.log(torch.tensor([[5.]])), torch.zeros(1, 1), torch.tensor([-1.]), torch.ones(1, 1),
    ...          dual_clip_c=3.0).loss
    tensor([[3.]])
    """
    A, m, valid = _prepare(logp, old_logp, adv, mask)
    ratio = torch.exp(logp - old_logp)                                 # (B, T)
    loss = torch.maximum(-A * ratio, -A * ratio.clamp(1 - eps_low, 1 + eps_high))
    low = (ratio < 1 - eps_low) & (A < 0) & valid
    high = (ratio > 1 + eps_high) & (A > 0) & valid
    if dual_clip_c is not None:
        if dual_clip_c <= 1:
            raise ValueError(f"dual_clip_c: expected None or a float > 1, got {dual_clip_c}")
        loss = torch.where(A < 0, torch.minimum(loss, -A * dual_clip_c), loss)
        high = high | ((ratio > dual_clip_c) & (A < 0) & valid)       # -A c is a constant: no gradient
    weight = (A * ratio * ~(low | high)).detach() * m                  # d(-A rho)/d logp = -A rho
    return LossOut(loss * m, ratio.detach(), low, high, weight)


@POLICY_LOSSES.register("cispo")
def cispo(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    adv: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float = 1.0,
    eps_high: float = 0.28,
    cispo_cap: float | None = None,
) -> LossOut:
    """CISPO (MiniMax-M1, arXiv 2506.13585): loss_t = -sg(clip(rho_t, 1 - eps_low, cap)) A logp_t.

    The IS *weight* is truncated and detached, so every token keeps a gradient (PPO's clip zeroes it):
    weight = A clip(rho). Two cap conventions exist:
    - ``cispo_cap=None`` (default, the paper's formula, verl / Trinity-RFT): cap = 1 + eps_high;
    - ``cispo_cap=<float>``: an absolute cap, as TRL's ``loss_type="cispo"`` reads ``epsilon_high``
      (e.g. 5.0, ScaleRL's truncated IS); eps_high is then ignored.
    The paper imposes no lower bound ("eps_low set large"): the default eps_low = 1.0 makes it 0.
    A recipe that leaves eps_low / eps_high unset runs these defaults (``rlnb.algos.resolve``).

    >>> out = cispo(torch.log(torch.tensor([[2.0, 1.0]])), torch.zeros(1, 2), torch.tensor([1.]), torch.ones(1, 2))
    >>> out.weight, out.clipped_high
    (tensor([[1.2800, 1.0000]]), tensor([[ True, False]]))
    """
    A, m, valid = _prepare(logp, old_logp, adv, mask)
    if cispo_cap is not None and cispo_cap <= 0:
        raise ValueError(f"cispo_cap: expected None or a positive float, got {cispo_cap}")
    ratio = torch.exp(logp - old_logp).detach()                        # (B, T)
    lower, upper = 1 - eps_low, (1 + eps_high if cispo_cap is None else cispo_cap)
    w = ratio.clamp(min=lower, max=upper)                              # (B, T) truncated IS weight
    low, high = (ratio < lower) & valid, (ratio > upper) & valid
    return LossOut(-A * w * logp * m, ratio, low, high, A * w * m)


@POLICY_LOSSES.register("gspo")
def gspo(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    adv: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float = 3e-4,
    eps_high: float = 4e-4,
) -> LossOut:
    """GSPO (Qwen, arXiv 2507.18071): one length-normalised ratio per sequence, clipped like PPO.

    s_i = exp(mean_t (logp - old_logp)) over the valid tokens;  loss_i = max(-A s_i, -A clip(s_i, 1-eps_low, 1+eps_high)).
    Written in the paper's token form s_{i,t} = sg(s_i) pi_t / sg(pi_t): its value is s_i at every
    token and its gradient w.r.t. logp_t is s_i, so with ``seq-mean-token-mean`` (the paper's
    aggregation) value and gradient equal the sequence-level objective, and a per-token A (GSPO-token)
    also works. weight = A s_i where not clipped, else 0. The paper's range is 3e-4 / 4e-4: the gspo
    recipe sets the shared eps_low / eps_high fields. ``ratio`` reports s_i on every valid token.

    >>> lp = torch.tensor([[0.2, -0.2, 0.0]]); out = gspo(lp, torch.zeros(1, 3), torch.tensor([1.]), torch.tensor([[1., 1., 0.]]))
    >>> out.ratio, out.weight
    (tensor([[1., 1., 1.]]), tensor([[1., 1., 0.]]))
    """
    A, m, valid = _prepare(logp, old_logp, adv, mask)
    n = m.sum(-1).clamp(min=1)                                         # (B,) |o_i|
    log_s = (((logp - old_logp) * m).sum(-1) / n).detach()            # (B,) log s_i
    s_tok = torch.exp(log_s.unsqueeze(-1) + logp - logp.detach())     # (B, T) value s_i, grad s_i
    loss = torch.maximum(-A * s_tok, -A * s_tok.clamp(1 - eps_low, 1 + eps_high))
    s = s_tok.detach()
    low = (s < 1 - eps_low) & (A < 0) & valid
    high = (s > 1 + eps_high) & (A > 0) & valid
    return LossOut(loss * m, s, low, high, A * s * ~(low | high) * m)


@POLICY_LOSSES.register("geo_mean")
def geo_mean(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    adv: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float = 0.4,
    eps_high: float = 0.4,
) -> LossOut:
    """GMPO (Geometric-Mean Policy Optimization, arXiv 2507.20673): the geometric mean of the token ratios.

    c_t = min(log rho_t, eps_high) if A > 0 else max(log rho_t, -eps_low)   (PPO's one-sided clip, in log space)
    s_i = exp(mean_t c_t) over the valid tokens;  loss_i = -A s_i
    The clip acts per token *before* the mean, so eps_low / eps_high are log-space bounds: the ratio range
    is (exp(-eps_low), exp(eps_high)); the paper's 0.4 / 0.4 is far wider than PPO's 0.2, because one
    outlier token moves a geometric mean much less than an arithmetic one. Written in token form like
    ``gspo``: value s_i at every token, gradient s_i on unclipped tokens, 0 on clipped ones, so with
    ``seq-mean-token-mean`` (the aggregation it pairs with) value and gradient equal mean_i loss_i.
    weight = A s_i where not clipped, else 0; ``ratio`` reports s_i on every valid token.
    Where the references differ: TRL (``trl.experimental.gmpo``) and the paper default to 0.4; verl's
    ``geo_mean`` reads the shared PPO clip fields (0.2 unless set) and clips with sign(A), which gives
    c_t = 0 where A = 0 (we take the A < 0 branch there: the loss is 0 either way). Both average over all
    B rows; seq-mean-token-mean averages over the rows with a valid token.

    Log-ratios 0.2, -0.2, 0.6 with A > 0: the third is clipped to 0.4, s = exp(0.4 / 3) = 1.1426.

    >>> out = geo_mean(torch.tensor([[0.2, -0.2, 0.6]]), torch.zeros(1, 3), torch.tensor([1.]), torch.ones(1, 3))
    >>> out.ratio, out.weight, out.clipped_high
    (tensor([[1.1426, 1.1426, 1.1426]]), tensor([[1.1426, 1.1426, 0.0000]]), tensor([[False, False,  True]]))
    """
    A, m, valid = _prepare(logp, old_logp, adv, mask)
    d = logp - old_logp                                                # (B, T) log rho
    c = torch.where(A > 0, d.clamp(max=eps_high), d.clamp(min=-eps_low))  # (B, T) clipped, grad 0 where clipped
    n = m.sum(-1).clamp(min=1)                                         # (B,) |o_i|
    log_s = ((c * m).sum(-1) / n).detach()                             # (B,) log s_i
    s_tok = torch.exp(log_s.unsqueeze(-1) + c - c.detach())           # (B, T) value s_i, grad s_i (unclipped)
    low = (d < -eps_low) & (A < 0) & valid
    high = (d > eps_high) & (A > 0) & valid
    s = s_tok.detach()
    return LossOut(-A * s_tok * m, s, low, high, (A * s * ~(low | high) * m).detach())


@POLICY_LOSSES.register("sapo")
def sapo(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    adv: torch.Tensor,
    mask: torch.Tensor,
    *,
    tau_pos: float = 1.0,
    tau_neg: float = 1.05,
) -> LossOut:
    """SAPO (Soft Adaptive Policy Optimization, Qwen, arXiv 2511.20347): a smooth gate instead of a clip.

    loss_t = -A f(rho_t),  f(rho) = (4 / tau) sigmoid(tau (rho - 1)),  tau = tau_pos if A > 0 else tau_neg.
    weight = A rho f'(rho) = A rho 4 sigmoid(x) (1 - sigmoid(x)), x = tau (rho - 1): exactly A at rho = 1
    (the 4/tau makes it match PG on-policy), decaying smoothly as rho leaves 1; a larger tau decays
    faster. Paper defaults tau_pos = 1.0, tau_neg = 1.05 (negative updates decay faster). Nothing is
    hard-clipped: both masks are all False. Note the loss value at rho = 1 is -2A/tau, not -A.

    >>> out = sapo(torch.zeros(1, 1), torch.zeros(1, 1), torch.tensor([1.]), torch.ones(1, 1), tau_pos=2.0)
    >>> out.loss, out.weight
    (tensor([[-1.]]), tensor([[1.]]))
    """
    A, m, valid = _prepare(logp, old_logp, adv, mask)
    ratio = torch.exp(logp - old_logp)                                 # (B, T)
    tau = torch.where(A > 0, ratio.new_tensor(tau_pos), ratio.new_tensor(tau_neg))  # (B, T)
    sig = torch.sigmoid(tau * (ratio - 1))
    loss = -A * (4 / tau) * sig * m
    weight = (A * ratio * 4 * sig * (1 - sig)).detach() * m
    return LossOut(loss, ratio.detach(), _none(valid), _none(valid), weight)


# Each multiplies every token's loss by the token's advantage: a token with A = 0 adds exactly nothing to the
# gradient, so the Updater skips the backward of rows with A = 0 everywhere (``registry.vanishes_at_zero_adv``)
pg.vanishes_at_zero_adv = ppo_clip.vanishes_at_zero_adv = cispo.vanishes_at_zero_adv = True
gspo.vanishes_at_zero_adv = geo_mean.vanishes_at_zero_adv = sapo.vanishes_at_zero_adv = True
