"""KL estimators on sampled tokens, d = logp - ref_logp (Schulman, "Approximating KL divergence", 2020).
Signature: ``fn(logp, ref_logp) -> (B, T)`` per-token estimate of KL(pi || pi_ref), tokens sampled
from pi. With r = pi_ref / pi = exp(-d): k1 = -log r, k2 = (log r)^2 / 2, k3 = (r - 1) - log r.

KL can sit in the loss (GRPO: + beta * agg(k)) or in the reward (classic PPO / RLOO:
``kl_penalized_rewards``). ``AdaptiveKLController`` moves the coefficient toward a target KL.
"""

from __future__ import annotations

import torch

from rlnb.algos.registry import Registry
from rlnb.core.checks import check_number, check_same_device, check_tensor

KL_ESTIMATORS = Registry("KL estimator")


def _check_pair(logp: torch.Tensor, ref_logp: torch.Tensor) -> None:
    """Both finite float tensors of one shape on one device."""
    for name, x in (("logp", logp), ("ref_logp", ref_logp)):
        check_tensor(name, x, floating=True, finite=True)
    check_same_device(logp=logp, ref_logp=ref_logp)
    if logp.shape != ref_logp.shape:
        raise ValueError(f"ref_logp: expected the shape of logp {tuple(logp.shape)}, got {tuple(ref_logp.shape)}")


@KL_ESTIMATORS.register("k1")
def k1(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k1 = d = logp - ref_logp (Schulman 2020): unbiased, high variance, negative on some samples.

    >>> k1(torch.tensor([0.0, 1.0]), torch.tensor([0.0, 2.0]))
    tensor([ 0., -1.])
    """
    _check_pair(logp, ref_logp)
    return logp - ref_logp


@KL_ESTIMATORS.register("k2")
def k2(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k2 = d^2 / 2 >= 0 (Schulman 2020): biased (its mean is not the KL), low variance; its gradient
    is d grad logp.

    >>> k2(torch.tensor([0.0, 1.0]), torch.tensor([0.0, 3.0]))
    tensor([0., 2.])
    """
    _check_pair(logp, ref_logp)
    return (logp - ref_logp) ** 2 / 2


@KL_ESTIMATORS.register("k3")
def k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k3 = exp(-d) + d - 1 >= 0, d = logp - ref_logp (Schulman 2020): unbiased, low variance; GRPO's
    choice (DeepSeekMath, arXiv 2402.03300).

    >>> k3(torch.tensor([0.0, 1.0]), torch.tensor([0.0, 0.0]))
    tensor([0.0000, 0.3679])
    """
    _check_pair(logp, ref_logp)
    d = logp - ref_logp
    return torch.exp(-d) + d - 1


@KL_ESTIMATORS.register("k3+")
def k3_plus(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Straight-through "k3 value, k2 gradient" (Schulman 2020 estimators). The value is k3 (unbiased, what you log); the gradient
    is k2's, d grad logp, whose mean over on-policy samples is the gradient of KL(pi || pi_ref).
    k3's own gradient, (1 - exp(-d)) grad logp, averages to the gradient of the *reverse*
    KL(pi_ref || pi) instead. Written k2 + sg(k3 - k2).

    >>> x = torch.tensor([1.0], requires_grad=True); y = k3_plus(x, torch.zeros(1)); y.backward()
    >>> y.detach(), x.grad
    (tensor([0.3679]), tensor([1.]))
    """
    low_var = k2(logp, ref_logp)
    return low_var + (k3(logp, ref_logp) - low_var).detach()


@KL_ESTIMATORS.register("abs")
def abs_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """|d| = |logp - ref_logp|, i.e. |k1| (Schulman 2020 notation; verl's ``kl_penalty="abs"``, no paper).

    >= 0 but biased upward: E_pi |d| >= |E_pi d| = KL. Its gradient sign(d) grad logp pulls every token
    back toward pi_ref with the same strength however far it moved (an L1 penalty on the log-ratio),
    where k2's d grad logp grows with the distance. TRL has no such estimator.

    >>> abs_kl(torch.tensor([0.0, 1.0, -1.0]), torch.tensor([0.0, 3.0, -2.0]))
    tensor([0., 2., 1.])
    """
    _check_pair(logp, ref_logp)
    return (logp - ref_logp).abs()


def _straight_through_k2(value: torch.Tensor, logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k2 + sg(value - k2): ``value`` forward, k2's gradient d grad logp backward."""
    low_var = k2(logp, ref_logp)
    return low_var + (value - low_var).detach()


@KL_ESTIMATORS.register("k1+")
def k1_plus(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Straight-through "k1 value, k2 gradient" (Schulman 2020 estimators; verl's ``kl_loss_type="k1+"``, no
    paper). The value is k1 = d, unbiased for KL(pi || pi_ref) (negative on some tokens); the gradient is
    k2's, d grad logp. k1's own gradient is grad logp, whose mean under pi is 0: as a loss k1 alone pulls
    nothing back toward pi_ref. Written k2 + sg(k1 - k2), the same trick as ``k3+``.

    d = 1 and d = -0.5: values 1 and -0.5 (k1's), gradients 1 and -0.5 (k2's d; k1's would be 1 and 1).

    >>> x = torch.tensor([1.0, -0.5], requires_grad=True); y = k1_plus(x, torch.zeros(2)); y.sum().backward()
    >>> y.detach(), x.grad
    (tensor([ 1.0000, -0.5000]), tensor([ 1.0000, -0.5000]))
    """
    return _straight_through_k2(k1(logp, ref_logp), logp, ref_logp)


@KL_ESTIMATORS.register("abs+")
def abs_plus(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Straight-through "|d| value, k2 gradient" (Schulman 2020 notation; verl's ``kl_loss_type="abs+"``, no
    paper). The value is ``abs``'s |logp - ref_logp| (what you log); the gradient is k2's d grad logp, so
    the pull toward pi_ref grows with the distance instead of ``abs``'s constant sign(d) grad logp.
    Written k2 + sg(|d| - k2).

    d = 2 and d = -1: values 2 and 1, gradients 2 and -1 (``abs`` alone would give 1 and -1).

    >>> x = torch.tensor([2.0, -1.0], requires_grad=True); y = abs_plus(x, torch.zeros(2)); y.sum().backward()
    >>> y.detach(), x.grad
    (tensor([2., 1.]), tensor([ 2., -1.]))
    """
    return _straight_through_k2(abs_kl(logp, ref_logp), logp, ref_logp)


def kl_penalized_rewards(rewards: torch.Tensor, logp: torch.Tensor, ref_logp: torch.Tensor,
                         mask: torch.Tensor, *, kl_coef: float = 0.05) -> torch.Tensor:
    """KL in the reward (InstructGPT / classic PPO-RLHF, RLOO): r_i - kl_coef * sum_t k1_{i,t} M_{i,t}.

    Shapes: rewards (B,), logp, ref_logp, mask (B, T) -> (B,), detached (a reward is a constant).
    ``kl_coef`` is TRL PPOTrainer's name; it is separate from ``beta`` (the KL-in-the-loss coefficient).

    >>> kl_penalized_rewards(torch.tensor([1.]), torch.tensor([[-1., -1., 0.]]), torch.tensor([[-2., -1., 5.]]),
    ...                      torch.tensor([[1., 1., 0.]]), kl_coef=0.1)
    tensor([0.9000])
    """
    check_tensor("rewards", rewards, dim=1, finite=True)
    check_number("kl_coef", kl_coef)
    if mask.shape != logp.shape or logp.dim() != 2 or logp.shape[0] != rewards.shape[0]:
        raise ValueError(f"mask: expected (B, T) = {(rewards.shape[0], 'T')} like logp {tuple(logp.shape)}, "
                         f"got {tuple(mask.shape)}")
    _check_pair(logp, ref_logp)
    kl = ((logp - ref_logp) * mask.to(logp.dtype)).sum(-1)             # (B,)
    return (rewards - kl_coef * kl).detach()


class AdaptiveKLController:
    """Proportional controller for a KL coefficient (Ziegler et al. 2019, arXiv 1909.08593, sec. 2.2).

    e = clip(KL_observed / target - 1, -max_error, max_error);  beta <- beta (1 + e n_steps / horizon).
    The paper writes beta_{t+1} = beta_t (1 + K_beta e_t) with K_beta = 0.1; here K_beta = n_steps /
    horizon (the form of the authors' lm-human-preferences code and TRL), so a larger batch moves beta
    more. Defaults: beta 0.2, target 6 nats per sequence, horizon 10000, max_error 0.2. Works for
    either KL coefficient (``kl_coef`` in the reward or ``beta`` in the loss).

    >>> c = AdaptiveKLController(target=6.0, horizon=10000, beta=0.2)
    >>> round(c.update(observed_kl=12.0, n_steps=1000), 4)  # e = clip(1, -.2, .2) = .2: beta * 1.02
    0.204
    """

    def __init__(self, target: float, horizon: int, *, beta: float = 0.2, max_error: float = 0.2):
        check_number("target", target, low=0.0, low_open=True)
        check_number("horizon", horizon, low=0.0, low_open=True)
        check_number("beta", beta, low=0.0)
        check_number("max_error", max_error, low=0.0)
        self.target, self.horizon, self.beta, self.max_error = target, horizon, beta, max_error

    def update(self, observed_kl: float, n_steps: int) -> float:
        """Feed the observed mean KL of the last batch and its size; returns the new beta."""
        check_number("observed_kl", observed_kl)  # a NaN would make every later beta NaN
        check_number("n_steps", n_steps, low=0.0)
        error = min(max(float(observed_kl) / self.target - 1, -self.max_error), self.max_error)
        self.beta *= 1 + error * n_steps / self.horizon
        return self.beta


def kl_regularised_optimum(ref_probs: torch.Tensor, rewards: torch.Tensor, *, beta: float) -> torch.Tensor:
    """The policy that maximises E_pi[r] - beta KL(pi || pi_ref) over a fixed set of outcomes:
    pi*(y) = pi_ref(y) exp(r(y) / beta) / Z (Ziegler et al. 2019; the closed form DPO starts from).

    ``ref_probs`` (N,) sums to 1, ``rewards`` (N,). So pi*(y) / pi_ref(y) <= exp((r_max - r_min) / beta):
    beta bounds how far any outcome's probability can be tilted, however it is paid. beta = 0 is the
    limit: all mass on the highest reward, shared in proportion to pi_ref.

    >>> kl_regularised_optimum(torch.tensor([0.5, 0.5]), torch.tensor([1.0, 0.0]), beta=1.0).tolist()[0] == \
        torch.e / (torch.e + 1)
    True
    >>> [round(p, 6) for p in kl_regularised_optimum(torch.tensor([0.2, 0.3, 0.5]), torch.tensor([1.0, 1.0, 0.0]), beta=0.0).tolist()]
    [0.4, 0.6, 0.0]
    """
    check_number("beta", beta, low=0.0)
    ref_probs, rewards = torch.as_tensor(ref_probs, dtype=torch.float64), torch.as_tensor(rewards, dtype=torch.float64)
    if ref_probs.shape != rewards.shape or ref_probs.dim() != 1:
        raise ValueError(f"ref_probs, rewards: expected two (N,) tensors, got {tuple(ref_probs.shape)} and "
                         f"{tuple(rewards.shape)}")
    if (ref_probs < 0).any() or abs(float(ref_probs.sum()) - 1) > 1e-6:
        raise ValueError("ref_probs: expected probabilities >= 0 that sum to 1")
    if beta == 0:
        top = (rewards == rewards.max()).double() * ref_probs                     # (N,)
        return top / top.sum()
    return torch.softmax(ref_probs.log() + rewards / beta, dim=0)                  # (N,)


def k3_loss_optimum(ref_probs: torch.Tensor, rewards: torch.Tensor, *, beta: float) -> torch.Tensor:
    """The policy that maximises E_pi[r] - beta KL(pi_ref || pi) over a fixed set of outcomes: what k3 in the loss
    optimises when one token is the whole completion (k3's gradient averages to KL(pi_ref || pi)'s, see ``k3_plus``).
    It is not ``kl_regularised_optimum``: that one is the sequence-level KL(pi || pi_ref) objective's.

    The derivative with a multiplier for sum pi = 1: r(y) + beta pi_ref(y) / pi(y) = lambda, so
    pi(y) = beta pi_ref(y) / (lambda - r(y)), with lambda in (r_max, r_max + beta] fixed by sum pi = 1 (bisection:
    the sum falls as lambda grows). Its tilt pi / pi_ref = beta / (lambda - r) is at most beta / (beta - dr) when
    beta > dr = r_max - r_min; for beta <= dr nothing but pi <= 1 caps it: a rare paid outcome can grow toward
    1 / pi_ref, far past the sequence objective's e^(dr / beta).

    >>> pi = k3_loss_optimum(torch.tensor([0.5, 0.5]), torch.tensor([1.0, 0.0]), beta=1.0)  # lambda = 1 + 1/sqrt(2)
    >>> round(float(pi[0]), 6) == round(2 ** -0.5, 6)
    True
    """
    check_number("beta", beta, low=0.0)
    if beta == 0:
        raise ValueError("beta: expected > 0 (at beta = 0 every objective is E[r]: see kl_regularised_optimum)")
    ref_probs, rewards = torch.as_tensor(ref_probs, dtype=torch.float64), torch.as_tensor(rewards, dtype=torch.float64)
    if ref_probs.shape != rewards.shape or ref_probs.dim() != 1:
        raise ValueError(f"ref_probs, rewards: expected two (N,) tensors, got {tuple(ref_probs.shape)} and "
                         f"{tuple(rewards.shape)}")
    if (ref_probs < 0).any() or abs(float(ref_probs.sum()) - 1) > 1e-6:
        raise ValueError("ref_probs: expected probabilities >= 0 that sum to 1")
    top = float(rewards[ref_probs > 0].max())                    # outcomes pi_ref never samples stay at 0
    lo, hi = top, top + beta                                     # sum(lo+) = inf > 1 >= sum(hi)
    for _ in range(200):
        lam = (lo + hi) / 2
        total = float((beta * ref_probs / (lam - rewards).clamp(min=1e-300))[ref_probs > 0].sum())
        lo, hi = (lam, hi) if total > 1 else (lo, lam)
    pi = torch.where(ref_probs > 0, beta * ref_probs / (hi - rewards).clamp(min=1e-300), torch.zeros_like(ref_probs))
    return pi / pi.sum()                                         # (N,) the last bisection step's rounding, removed
