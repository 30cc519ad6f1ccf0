"""REINFORCE++ (Hu et al., arXiv 2501.03262): advantages whitened over the batch's *tokens*.

PPO-style whitening, without a critic: the return of every token of completion i is its reward r_i
(outcome reward, gamma = 1), and the returns of all valid tokens of the batch are whitened together,

    A_i = (x_i - mu) / (sigma + eps),   mu, sigma^2 = the mean and variance of x over the valid *tokens*,

so a completion of |o_i| tokens counts |o_i| times in mu and sigma (long completions pull the
statistics). Because the KL-in-reward term and the reward are summed per completion here (see
``rlnb.algos.kl_penalized_rewards``), every token of a completion has the same return and A stays one
number per completion; token-weighted statistics only need each completion's length, passed as the
extra input ``lengths`` (B,) (the number of valid tokens; the Advantager passes ``batch.lengths``).

- ``reinforce_plus_plus``: x = r (no baseline; works with G = 1).
- ``reinforce_plus_plus_baseline``: x = r - mean_G r first (the group mean as baseline), then whitened
  over the batch: the paper's variant for groups. Group advantages sum to zero only when the lengths
  are equal; what holds in general is a token-weighted mean of 0 and variance of 1 over the batch.

Conventions where references differ: verl whitens with rsqrt(var + 1e-8); here (x - mu) / (sigma + eps)
with the shared ``eps`` and ``unbiased`` (Bessel's correction over the N valid tokens: divide by N - 1)
fields, as GRPO does, so a batch of equal rewards gets exactly 0. verl gives a singleton group a
baseline of 0 in the baseline variant (falling back to plain REINFORCE++); here, as for every
group-relative entry, a singleton centres to 0. verl also offers gamma < 1 for REINFORCE++ (per-token
returns); with outcome rewards the paper's gamma = 1 is what this module implements.
"""

from __future__ import annotations

import torch

from rlnb.algos.advantages import ADVANTAGES
from rlnb.algos.inputs import centred as _centred
from rlnb.algos.inputs import extra_input as _extra
from rlnb.algos.inputs import groups as _groups


def _token_whiten(x: torch.Tensor, n: torch.Tensor, unbiased: bool, eps: float) -> torch.Tensor:
    """(B,) x whitened with each row counted n_i times (statistics in fp64, like GRPO's)."""
    if (n < 0).any():
        raise ValueError(f"lengths: expected token counts >= 0, got {n.tolist()[:10]}")
    x64, w = x.double(), n.double()                                    # (B,)
    N = w.sum()
    if N == 0:                                                         # nothing valid: nothing to whiten
        return torch.zeros_like(x)
    mu = (w * x64).sum() / N
    var = (w * (x64 - mu) ** 2).sum() / (N - 1 if unbiased else N).clamp(min=1)
    return ((x64 - mu) / (var.sqrt() + eps)).to(x.dtype)


@ADVANTAGES.register("reinforce_plus_plus")
def reinforce_plus_plus(rewards: torch.Tensor, group_size: int, lengths: torch.Tensor | None = None, *,
                        unbiased: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """REINFORCE++ (arXiv 2501.03262): A_i = (r_i - mu) / (sigma + eps) over the batch's valid tokens.

    Shapes: rewards (B,), lengths (B,) (extra input: valid tokens per completion) -> (B,). ``group_size``
    is only checked. Rewards [1, 0] with lengths [3, 1] are the tokens 1, 1, 1, 0: mu = 0.75,
    sigma^2 = (3 * 0.0625 + 0.5625) / 3 = 0.25, so A = [0.25, -0.75] / 0.5.

    >>> reinforce_plus_plus(torch.tensor([1., 0.]), 1, torch.tensor([3, 1]))
    tensor([ 0.5000, -1.5000])
    """
    r = _groups(rewards, group_size).reshape(-1)                       # (B,)
    n = _extra("lengths", lengths, r, "reinforce_plus_plus", "each completion's number of valid tokens")
    return _token_whiten(r, n, unbiased, eps)


@ADVANTAGES.register("reinforce_plus_plus_baseline")
def reinforce_plus_plus_baseline(rewards: torch.Tensor, group_size: int, lengths: torch.Tensor | None = None, *,
                                 unbiased: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """REINFORCE++-baseline (arXiv 2501.03262): x_i = r_i - mean_G r, then whitened over the batch's tokens.

    Shapes: rewards (B,), lengths (B,) (extra input) -> (B,). Two groups [1, 0] and [0, 0], one token
    each: x = [.5, -.5, 0, 0], mu = 0, sigma^2 = 0.5 / 3, sigma = 0.4082.

    >>> reinforce_plus_plus_baseline(torch.tensor([1., 0., 0., 0.]), 2, torch.ones(4))
    tensor([ 1.2247, -1.2247,  0.0000,  0.0000])
    """
    x = _centred(rewards, group_size).reshape(-1)                      # (B,) group-centred
    n = _extra("lengths", lengths, x, "reinforce_plus_plus_baseline", "each completion's number of valid tokens")
    return _token_whiten(x, n, unbiased, eps)


reinforce_plus_plus.extra_inputs = reinforce_plus_plus_baseline.extra_inputs = ("lengths",)
