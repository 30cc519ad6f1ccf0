"""DRO's policy loss: the policy gradient plus a quadratic penalty on the per-token log-ratio.

Same signature as ``rlnb.algos.losses``: ``fn(logp, old_logp, adv, mask, *, <hyper>) -> LossOut`` on
``(B, T)`` tensors (``adv`` (B,) or (B, T)), minimised.
"""

from __future__ import annotations

import torch

from rlnb.algos.inputs import prepare_tokens as _prepare
from rlnb.algos.losses import POLICY_LOSSES, LossOut


@POLICY_LOSSES.register("dro")
def dro(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, *,
        dro_beta: float | None = None) -> LossOut:
    """DRO (Direct Reward Optimisation, Richemond et al., arXiv 2405.19107), as verl 0.9.1's ``dro`` loss:

    loss_t = -(A logp_t - (beta / 2) (logp_t - old_logp_t)^2),   beta = ``dro_beta``.

    weight = -d loss / d logp_t = A - beta (logp_t - old_logp_t): at the rollout policy it is A, so the
    first step is ``pg``'s; as the token's log-ratio d_t moves in A's direction the weight shrinks, and it
    is 0 at d_t = A / beta. So each token's loss is a parabola in logp with its minimum at
    log rho_t = A / beta: a soft trust region (PPO cuts the gradient at a clip edge; DRO lets it fade).

    Conventions. The paper fits a sequence-level square, (r - V(x) - tau log(pi(y) / pi_ref(y)))^2 / 2, on
    offline data, against the *reference* policy; its gradient, divided by tau, is
    -(A - tau log(pi / pi_ref)) grad log pi, the same shape as here. verl (and this entry) apply it per
    token, online, with the rollout policy old_logp in place of pi_ref and the group advantage as
    r - V. verl requires ``dro_beta`` > 0 with no default, and so does this entry: left unset it raises
    (1.0 puts each token's optimum at log rho = A). Shapes: (B, T) in, LossOut of (B, T); ratio = exp(logp - old_logp), detached; nothing is
    clipped (clipped_low / clipped_high all False).

    A = 1, beta = 1: at d = 0 the loss is -A logp = 0.6931 for logp = log(1/2) with weight 1; at d = 0.5
    (logp = 0.5 - log 2 = -0.1931) it is 0.1931 + 0.125 = 0.3181 with weight 1 - 0.5 = 0.5.

    >>> lp = torch.tensor([[-0.6931, -0.1931]]); old = torch.tensor([[-0.6931, -0.6931]])
    >>> out = dro(lp, old, torch.tensor([1.]), torch.ones(1, 2), dro_beta=1.0)
    >>> out.loss, out.weight
    (tensor([[0.6931, 0.3181]]), tensor([[1.0000, 0.5000]]))
    """
    A, m, valid = _prepare(logp, old_logp, adv, mask)
    if dro_beta is None:
        raise ValueError("dro_beta: the loss 'dro' needs its penalty coefficient dro_beta > 0 and has no default "
                         "(verl 0.9.1 has none either); set it, e.g. dro_beta=1.0")
    if isinstance(dro_beta, bool) or not isinstance(dro_beta, (int, float)) or not dro_beta > 0:
        raise ValueError(f"dro_beta: expected a positive float (the quadratic penalty's coefficient), got {dro_beta!r}")
    d = logp - old_logp                                                # (B, T) per-token log-ratio
    loss = -(A * logp - 0.5 * dro_beta * d ** 2)                       # (B, T)
    weight = (A - dro_beta * d).detach() * m                           # -d loss / d logp
    none = torch.zeros_like(valid)
    return LossOut(loss * m, torch.exp(d).detach(), none, none, weight)
