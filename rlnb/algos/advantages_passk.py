"""Pass@k-optimised GRPO (Tang et al., "Optimizing Language Models for Inference Time Objectives using
Reinforcement Learning", arXiv 2503.19595): train for the best of k samples instead of the average.

The objective is J_k = E[max(r_1, ..., r_k)] over k independent samples (pass@k for 0/1 rewards). Its
policy gradient with the leave-one-out baseline max_{j != i} r_j (which does not depend on sample i) is

    grad J_k = k E[(max_j r_j - max_{j != i} r_j) grad log pi(o_i)].

From a group of G >= k samples, average that term over every set T of k - 1 *other* samples of the
group (an unbiased U-statistic):

    A_i = mean_T [max(r_i, max T) - max T] = mean_T relu(r_i - max T),

then divide by the group's std as GRPO does. With k = G (the paper's and verl's setting) T is all the
others: only the group's best sample gets A = r_max - r_second_max, the others 0. With 0/1 rewards
and c correct of G, a correct sample gets C(G - c, k - 1) / C(G - 1, k - 1) (the chance that none of
k - 1 others is correct) and a wrong one 0: once enough samples are correct, pass@k is already 1 and
the prompt gives no gradient. A >= 0 always: pass@k never pushes a sample down.

Conventions: ``pass_k=None`` is k = G (verl's ``grpo_passk``, which has no k); 2 <= k <= G otherwise
(the averaging over subsets for k < G is the same construction as PKPO, arXiv 2505.15201, with this
leave-one-out baseline). The std uses the shared ``unbiased`` and ``eps`` fields (verl: torch.std,
unbiased, eps 1e-6); verl has a switch to skip the division, here that would be another entry. A
singleton group (G = 1) gets 0 like every group-relative entry (verl raises).
"""

from __future__ import annotations

import math

import torch

from rlnb.algos.advantages import ADVANTAGES
from rlnb.algos.inputs import groups as _groups


def _max_weights(G: int, k: int) -> torch.Tensor:
    """(G-1,) P(max of a random (k-1)-subset of G-1 sorted values is the j-th smallest), j = 1..G-1."""
    return torch.tensor([math.comb(j - 1, k - 2) / math.comb(G - 1, k - 1) for j in range(1, G)],
                        dtype=torch.float64)


@ADVANTAGES.register("grpo_passk")
def grpo_passk(rewards: torch.Tensor, group_size: int, *, pass_k: int | None = None, unbiased: bool = True,
               eps: float = 1e-6) -> torch.Tensor:
    """Pass@k GRPO (arXiv 2503.19595): A_i = mean over (k-1)-sets T of the others of relu(r_i - max T),
    divided by (std_G r + eps).

    Shapes: rewards (B,) -> (B,), A >= 0. Two correct of four: with k = 2, each correct sample gets
    C(2, 1) / C(3, 1) = 2/3 before the std sqrt(1/3); with k = G = 4 (the default) either correct one
    is already matched by the other, so nobody gets anything.

    >>> grpo_passk(torch.tensor([1., 1., 0., 0.]), 4, pass_k=2)
    tensor([1.1547, 1.1547, 0.0000, 0.0000])
    >>> grpo_passk(torch.tensor([1., 1., 0., 0.]), 4)
    tensor([0., 0., 0., 0.])
    """
    r = _groups(rewards, group_size)                                   # (P, G)
    G = group_size
    if G == 1:
        return torch.zeros_like(r).reshape(-1)
    k = G if pass_k is None else pass_k
    if isinstance(k, bool) or not isinstance(k, int) or not 2 <= k <= G:
        raise ValueError(f"pass_k: expected None (= G) or an int in [2, G={G}] (G: the group size, a recipe's "
                         f"num_generations), got {pass_k!r}")
    r64 = r.double()
    others = torch.tensor([[j for j in range(G) if j != i] for i in range(G)])  # (G, G-1)
    o = r64[:, others].sort(dim=-1).values                            # (P, G, G-1) the others, ascending
    gain = (r64.unsqueeze(-1) - o).clamp(min=0)                       # (P, G, G-1) relu(r_i - o_(j))
    adv = (gain * _max_weights(G, k)).sum(-1)                          # (P, G)
    std = r64.std(dim=1, keepdim=True, unbiased=unbiased)              # (P, 1)
    return (adv / (std + eps)).to(r.dtype).reshape(-1)
