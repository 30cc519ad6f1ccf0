"""Two more baselines b for A_i = r_i - b: a greedy rollout's reward (ReMax) and the optimal,
length-weighted group mean (OPO). Any b that does not depend on completion i keeps the gradient
unbiased; the choice only changes its variance.
"""

from __future__ import annotations

import torch

from rlnb.algos.advantages import ADVANTAGES
from rlnb.algos.inputs import extra_input as _extra
from rlnb.algos.inputs import groups as _groups


@ADVANTAGES.register("remax")
def remax(rewards: torch.Tensor, group_size: int, greedy_rewards: torch.Tensor | None = None) -> torch.Tensor:
    """ReMax (Li et al., arXiv 2310.10505): A_i = r_i - r(greedy_i), the baseline is the reward of a
    greedy (argmax) rollout of the same prompt.

    Shapes: rewards (B,), greedy_rewards (extra input) (B,) — each row's prompt's greedy reward, repeated
    over the group — or (P,) one per prompt -> (B,). The greedy rollout costs one more generation per
    prompt and no critic; it is independent of the sampled completions, so the estimate is unbiased and
    works with G = 1 (the paper's setting). With groups it is the same baseline for the G samples (as
    in verl, which decodes the greedy rollout once per prompt before repeating the prompt G times).
    The Sampler decodes it and the Rewarder scores it when the estimator lists ``greedy_rewards``.

    >>> remax(torch.tensor([1., 0., 0., 1.]), 2, greedy_rewards=torch.tensor([1., 0.]))
    tensor([ 0., -1.,  0.,  1.])
    """
    r = _groups(rewards, group_size)                                   # (P, G)
    if greedy_rewards is not None and torch.as_tensor(greedy_rewards).shape == r.shape[:1]:
        greedy_rewards = torch.as_tensor(greedy_rewards).repeat_interleave(group_size)  # (P,) -> (B,)
    b = _extra("greedy_rewards", greedy_rewards, r.reshape(-1), "remax", "the reward of a greedy rollout per prompt")
    return r.reshape(-1) - b


@ADVANTAGES.register("opo")
def opo(rewards: torch.Tensor, group_size: int, lengths: torch.Tensor | None = None) -> torch.Tensor:
    """OPO (Hao et al., "On-Policy RL with Optimal Reward Baseline", arXiv 2505.23585):
    A_i = r_i - b,  b = sum_j |o_j| r_j / sum_j |o_j| over the group.

    The variance-minimising baseline is E[||grad log pi(o)||^2 r] / E[||grad log pi(o)||^2]; OPO
    approximates the squared gradient norm of a completion by its length |o_j|, so longer completions
    weigh more in the baseline. Shapes: rewards (B,), lengths (extra input) (B,) valid tokens -> (B,).
    What sums to zero is the length-weighted advantage, sum_i |o_i| A_i = 0 per group. A group whose
    lengths are all 0 falls back to the plain mean; a singleton group gets 0 (verl gives it b = 0).

    Rewards [1, 0] with lengths [3, 1]: b = 3/4.

    >>> opo(torch.tensor([1., 0.]), 2, torch.tensor([3, 1]))
    tensor([ 0.2500, -0.7500])
    """
    r = _groups(rewards, group_size)                                   # (P, G)
    n = _extra("lengths", lengths, r.reshape(-1), "opo", "each completion's number of valid tokens").view_as(r)
    if (n < 0).any():
        raise ValueError(f"lengths: expected token counts >= 0, got {n.flatten().tolist()[:10]}")
    r64, n64 = r.double(), n.double()                                  # fp64 like GRPO's statistics
    total = n64.sum(1, keepdim=True)                                   # (P, 1)
    b = torch.where(total > 0, (n64 * r64).sum(1, keepdim=True) / total.clamp(min=1e-12), r64.mean(1, keepdim=True))
    b = torch.where((r64 == r64[:, :1]).all(1, keepdim=True), r64[:, :1], b)  # equal rewards: exactly 0
    return (r64 - b).to(r.dtype).reshape(-1)


remax.extra_inputs = ("greedy_rewards",)
opo.extra_inputs = ("lengths",)
