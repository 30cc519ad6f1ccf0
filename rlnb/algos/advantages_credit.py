"""Credit per token from Monte-Carlo prefix values (VinePPO): each token's advantage is the change it
made to the chance of a right answer, V(s_t) - V(s_{t-1}), instead of one number for the whole completion.

The values come from ``rlnb.stages.credit.prefix_values`` (K continuations sampled from every prefix); the
Trainer computes them between the Rewarder and the Advantager when the estimator lists ``prefix_values``
among its ``extra_inputs``, with K = the ``mc_rollouts`` knob.
"""

from __future__ import annotations

import torch

from rlnb.algos.advantages import ADVANTAGES
from rlnb.algos.inputs import as_float as _as_float
from rlnb.algos.inputs import extra_input as _extra
from rlnb.algos.inputs import groups as _groups


@ADVANTAGES.register("vineppo")
def vineppo(rewards: torch.Tensor, group_size: int, prefix_values: torch.Tensor | None = None,
            lengths: torch.Tensor | None = None) -> torch.Tensor:
    """VinePPO (Kazemnejad et al., arXiv 2410.01679): A_t = r_t + gamma V(s_{t+1}) - V(s_t) with gamma = 1,
    the reward only at the end and V estimated by Monte Carlo, so for a completion of length L

        A_t = V(s_{t+1}) - V(s_t)  for t < L - 1,    A_{L-1} = r - V(s_{L-1}),    0 after,

    where s_t = prompt + first t tokens (t = 0..T-1 index the tokens). The advantages of a completion sum
    to r - V(s_0): its reward minus the value of its prompt, the same total a baseline r - b gives, but
    spread onto the tokens that moved the value. Groups play no part (G = 1 works); ``group_size`` is checked.

    Shapes: rewards (B,); prefix_values (extra input) (B, T + 1) from ``rlnb.stages.credit.prefix_values``, or
    (B,) = V(s_0) alone, which reduces to the sequence-level A = r - V(prompt) on every token (returned as
    (B,)); lengths (extra input) (B,) valid tokens -> (B, T). The final value is the Rewarder's reward r, so
    shaping terms in r reach the last token.

    Rewards [1, 0]; values [.5, .75, 1, 1] (length 2) and [.5, .25, 0, 0] (length 3):

    >>> vineppo(torch.tensor([1., 0.]), 2, torch.tensor([[.5, .75, 1., 1.], [.5, .25, 0., 0.]]), torch.tensor([2, 3]))
    tensor([[ 0.2500,  0.2500,  0.0000],
            [-0.2500, -0.2500,  0.0000]])
    """
    r = _groups(rewards, group_size).reshape(-1)                       # (B,)
    if prefix_values is not None and torch.as_tensor(prefix_values).dim() == 1:
        return r - _extra("prefix_values", prefix_values, r, "vineppo", "V(prompt) per row")
    if prefix_values is None:
        raise ValueError(f"prefix_values: the advantage estimator 'vineppo' needs Monte-Carlo prefix values as a "
                         f"({r.numel()}, T + 1) tensor (rlnb.stages.credit.prefix_values; it is listed in its "
                         "extra_inputs), got None")
    if not isinstance(prefix_values, torch.Tensor) or prefix_values.dim() != 2 or not prefix_values.isfinite().all():
        raise ValueError(f"prefix_values: expected a finite (B, T + 1) tensor, got {prefix_values!r:.80}")
    V = _as_float(prefix_values)                                       # (B, T + 1)
    n = _extra("lengths", lengths, r, "vineppo", "each completion's number of valid tokens").long()
    B, T = V.shape[0], V.shape[1] - 1
    if B != r.numel() or T < 1:
        raise ValueError(f"prefix_values: expected shape ({r.numel()}, T + 1) with T >= 1, got {tuple(V.shape)}")
    if (n < 1).any() or (n > T).any():
        raise ValueError(f"lengths: expected token counts in 1..{T} (the values' T), got {n.tolist()[:10]}")
    t = torch.arange(T + 1, device=V.device)                           # (T + 1,)
    V = torch.where(t[None, :] >= n[:, None], r[:, None].to(V.dtype), V)  # V(s_L) = r and after: nothing moves
    return V[:, 1:] - V[:, :-1]                                        # (B, T)


vineppo.extra_inputs = ("prefix_values", "lengths")
