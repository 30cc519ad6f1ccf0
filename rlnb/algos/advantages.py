"""Advantage estimators: rewards of G completions per prompt -> one advantage per completion.

Every registry entry has the signature ``fn(rewards, group_size, *, <hyper>) -> adv`` on ``(B,)``
tensors with the ``B = P * G`` rows of each prompt's group contiguous. Hyperparameters are keyword-only
and named like the ``Recipe`` fields that fill them (``eps``, ``unbiased``, ...).

Entries that need more than the rewards (OPO's and REINFORCE++'s completion lengths, ReMax's greedy
rewards) take those ``(B,)`` tensors as optional positional-or-keyword arguments after ``group_size``
(default None, so they are not mistaken for hyperparameters), list their names in ``fn.extra_inputs``
(read by ``rlnb.algos.extra_inputs``) and raise a ValueError naming the tensor when it is missing. More
entries live in ``advantages_whitened`` (REINFORCE++), ``advantages_baselines`` (ReMax, OPO),
``advantages_passk`` (pass@k), ``advantages_normalised`` (GDPO, GPG) and ``advantages_token_baseline`` (the optimal token
baselines, which return (B, T) advantages).

Singleton groups (G = 1) have no within-group baseline: every group-relative entry defines their
advantage as 0 (``reinforce`` alone returns the raw reward).

``gae`` is not a registry entry: it works on per-token rewards and values, ``(B, T) -> (B, T)``.
"""

from __future__ import annotations

import torch

from rlnb.algos.inputs import as_float as _as_float
from rlnb.algos.inputs import centred as _centred
from rlnb.algos.inputs import groups as _groups
from rlnb.algos.registry import Registry
from rlnb.core.checks import check_same_device, check_tensor

ADVANTAGES = Registry("advantage estimator")


@ADVANTAGES.register("reinforce")
def reinforce(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """REINFORCE (Williams 1992): A_i = r_i, no baseline. Unbiased, high variance.

    Shapes: rewards (B,) -> (B,). ``group_size`` is only checked, never used.

    >>> reinforce(torch.tensor([1., 0., 0., 0.]), 4)
    tensor([1., 0., 0., 0.])
    """
    return _groups(rewards, group_size).reshape(-1).clone()


@ADVANTAGES.register("reinforce_baseline")
def reinforce_baseline(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """REINFORCE with a baseline (Williams 1992), the group mean: A_i = r_i - mean_G r.

    Shapes: rewards (B,) -> (B,). The mean includes r_i itself, so the estimate is biased by a factor
    (G-1)/G (see ``rloo`` for the unbiased version). Numerically identical to ``dr_grpo``.

    >>> reinforce_baseline(torch.tensor([1., 0., 0., 0.]), 4)
    tensor([ 0.7500, -0.2500, -0.2500, -0.2500])
    """
    return _centred(rewards, group_size).reshape(-1)


@ADVANTAGES.register("grpo")
def grpo(rewards: torch.Tensor, group_size: int, *, unbiased: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """GRPO (DeepSeekMath, arXiv 2402.03300): A_i = (r_i - mean_G r) / (std_G r + eps).

    Shapes: rewards (B,) -> (B,).
    Conventions where libraries differ: ``unbiased=True`` divides the variance by G-1 (torch's and TRL's
    default); ``eps`` is 1e-6 here (verl), TRL uses 1e-4. A group whose rewards are all equal gets A = 0
    (the numerator is 0; the group statistics are computed in fp64 so that this holds exactly for fp32
    rewards too). A singleton group (G = 1) has no spread: its advantage is defined as 0.

    >>> grpo(torch.tensor([1., 0., 0., 0.]), 4)
    tensor([ 1.5000, -0.5000, -0.5000, -0.5000])
    """
    r = _groups(rewards, group_size)                                  # (P, G)
    if group_size == 1:
        return torch.zeros_like(r).reshape(-1)
    # Statistics in fp64: a group of equal fp32 rewards such as 0.7 must centre to exactly 0. In fp32 the
    # mean is off by an ulp, the std is ~1e-7, and dividing by (std + eps) turns rounding into |A| ~ 0.1.
    r64 = r.double()                                                  # (P, G)
    std = r64.std(dim=1, keepdim=True, unbiased=unbiased)             # (P, 1)
    centred = r64 - r64.mean(dim=1, keepdim=True)                     # (P, G), exactly 0 in an all-equal group
    A = torch.where(std > 0, centred / (std + eps), torch.zeros_like(centred))  # eps = 0 would give 0/0 there
    return A.to(r.dtype).reshape(-1)


@ADVANTAGES.register("dr_grpo")
def dr_grpo(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """Dr. GRPO (Understanding R1-Zero-Like Training, arXiv 2503.20783): A_i = r_i - mean_G r.

    Shapes: rewards (B,) -> (B,). Dropping GRPO's std removes its "difficulty bias" (nearly solved or
    nearly failed prompts get blown up by a tiny std). The paper's other half, a constant loss
    normaliser, is the ``seq-mean-token-sum-norm`` aggregation.

    >>> dr_grpo(torch.tensor([1., 0., 0., 0.]), 4)
    tensor([ 0.7500, -0.2500, -0.2500, -0.2500])
    """
    return _centred(rewards, group_size).reshape(-1)


@ADVANTAGES.register("rloo")
def rloo(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """RLOO (Ahmadian et al., arXiv 2402.14740): A_i = r_i - mean_{j != i} r_j = G/(G-1) (r_i - mean_G r).

    Shapes: rewards (B,) -> (B,). The leave-one-out baseline does not depend on r_i, so the estimate is
    unbiased. Singleton groups (no other sample to leave in) get A = 0.

    >>> rloo(torch.tensor([1., 0., 0., 0.]), 4)
    tensor([ 1.0000, -0.3333, -0.3333, -0.3333])
    """
    r = _groups(rewards, group_size)                                  # (P, G)
    if group_size == 1:
        return torch.zeros_like(r).reshape(-1)
    return ((r - r.mean(dim=1, keepdim=True)) * (group_size / (group_size - 1))).reshape(-1)


@ADVANTAGES.register("maxrl")
def maxrl(rewards: torch.Tensor, group_size: int, *, eps: float = 1e-6) -> torch.Tensor:
    """MaxRL (arXiv 2602.02710): A_i = (r_i - mean_G r) / (mean_G r + eps).

    Shapes: rewards (B,) -> (B,). For binary rewards with group success rate p: success -> (1-p)/p,
    failure -> -1, an all-fail group -> 0. Dividing by p (not by the std) weights hard prompts up;
    the paper shows it optimises sum_k (1/k) pass@k. Rewards must be >= 0 (the denominator is a
    success rate); a negative reward raises ValueError. ``eps`` is the same Recipe field as GRPO's.

    >>> maxrl(torch.tensor([1., 0., 0., 0., 0., 0., 0., 0.]), 4)
    tensor([ 3.0000, -1.0000, -1.0000, -1.0000,  0.0000,  0.0000,  0.0000,  0.0000])
    """
    r = _groups(rewards, group_size)                                  # (P, G)
    if (r < 0).any():
        raise ValueError("rewards: MaxRL divides by the group's mean reward, so rewards must be >= 0")
    mean = r.mean(dim=1, keepdim=True)                                # (P, 1)
    A = torch.where(mean > 0, (r - mean) / (mean + eps), torch.zeros_like(r))  # an all-fail group: 0, eps or not
    return A.reshape(-1)


@ADVANTAGES.register("batch_norm")
def batch_norm(rewards: torch.Tensor, group_size: int, *, unbiased: bool = True, eps: float = 1e-6,
               batch_std_centred: bool = False) -> torch.Tensor:
    """Group mean, batch std (Lite-PPO arXiv 2508.08221, ScaleRL arXiv 2510.13786):
    A_i = (r_i - mean_G r) / (std_batch + eps).

    Shapes: rewards (B,) -> (B,). Only the scale is shared by the batch, so a nearly solved prompt's tiny
    reward differences are not blown up as in GRPO. Where references differ:
    ``batch_std_centred=False`` (default, Lite-PPO) takes the std of the batch's raw rewards;
    ``True`` takes the std of the group-centred rewards (REINFORCE++-baseline style whitening).
    ``unbiased`` and ``eps`` are the same Recipe fields as GRPO's. With B = 1 the std is undefined
    and the advantage is defined as 0.

    Five ones and three zeros: population std sqrt(5/8 * 3/8) = sqrt(15)/8 = 0.4841, so the first group
    gets .75 / 0.4841 = 1.5492 and -.25 / 0.4841 = -0.5164; the all-correct group gets 0.

    >>> batch_norm(torch.tensor([1., 0., 0., 0., 1., 1., 1., 1.]), 4, unbiased=False)
    tensor([ 1.5492, -0.5164, -0.5164, -0.5164,  0.0000,  0.0000,  0.0000,  0.0000])
    """
    centred = _centred(rewards, group_size).reshape(-1)               # (B,)
    if centred.numel() < 2:
        return torch.zeros_like(centred)
    spread = centred if batch_std_centred else _as_float(rewards)
    std = spread.std(unbiased=unbiased)
    return centred / (std + eps) if std > 0 else torch.zeros_like(centred)  # no spread: 0, even with eps = 0


def gae(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, *, gamma: float = 1.0,
        lam: float = 1.0, whiten_advantages: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised Advantage Estimation (Schulman et al., arXiv 1506.02438), as used by PPO with a critic.

    delta_t = r_t + gamma V_{t+1} - V_t,   A_t = sum_k (gamma lam)^k delta_{t+k},   returns_t = A_t + V_t.

    Shapes: rewards, values, mask (B, T) -> (advantages, returns), both (B, T), zero where mask is 0.
    ``rewards`` are per-token (usually the scalar reward on the last valid token, plus any per-token KL
    penalty). The mask must be right-padded (valid tokens first); after the last valid token V = 0
    (terminal state). LLM defaults gamma = lam = 1 (InstructGPT-style). ``returns`` are computed before
    whitening. ``whiten_advantages`` subtracts the masked mean and divides by the masked std (Bessel
    correction) over all valid tokens of the batch.

    >>> adv, ret = gae(torch.tensor([[0., 1.]]), torch.tensor([[.5, .5]]), torch.ones(1, 2),
    ...                whiten_advantages=False)
    >>> adv, ret
    (tensor([[0.5000, 0.5000]]), tensor([[1., 1.]]))
    """
    for name, x in (("rewards", rewards), ("values", values), ("mask", mask)):
        check_tensor(name, x, finite=name != "mask")
    check_same_device(rewards=rewards, values=values, mask=mask)
    if not (rewards.shape == values.shape == mask.shape) or rewards.dim() != 2:
        raise ValueError(f"rewards, values, mask: expected equal (B, T) shapes, got {tuple(rewards.shape)}, "
                         f"{tuple(values.shape)}, {tuple(mask.shape)}")
    m = mask.to(values.dtype)                                         # (B, T)
    r, v = rewards.to(values.dtype) * m, values.detach() * m          # (B, T)
    adv = torch.zeros_like(v)
    next_adv = torch.zeros_like(v[:, 0])                              # (B,)
    next_v = torch.zeros_like(v[:, 0])                                # (B,)
    for t in reversed(range(v.shape[1])):                             # backward recursion over tokens
        delta = r[:, t] + gamma * next_v - v[:, t]
        next_adv = (delta + gamma * lam * next_adv) * m[:, t]
        next_v = v[:, t]
        adv[:, t] = next_adv
    returns = (adv + v) * m
    if whiten_advantages:
        adv = _masked_whiten(adv, m)
    return adv, returns


def _masked_whiten(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    n = m.sum()
    mean = (x * m).sum() / n.clamp(min=1)
    var = (((x - mean) * m) ** 2).sum() / (n - 1).clamp(min=1)       # Bessel-corrected
    return (x - mean) * torch.rsqrt(var + 1e-8) * m
