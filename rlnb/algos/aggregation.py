"""Loss aggregation: how a ``(B, T)`` per-token loss becomes one scalar. GRPO, DAPO and Dr. GRPO
differ mostly here. Signature: ``fn(loss, mask, *, group_size, <hyper>) -> scalar``.
"""

from __future__ import annotations

import torch

from rlnb.algos.registry import Registry

AGGREGATIONS = Registry("loss aggregation")


@AGGREGATIONS.register("token-mean")
def token_mean(loss: torch.Tensor, mask: torch.Tensor, *, group_size: int = 1) -> torch.Tensor:
    """sum_{i,t} l_{i,t} M_{i,t} / sum_{i,t} M_{i,t}: every token weighs the same (DAPO, arXiv 2503.14476).

    >>> token_mean(torch.tensor([[1., 1., 1.], [4., 0., 0.]]), torch.tensor([[1., 1., 1.], [1., 0., 0.]]))
    tensor(1.7500)
    """
    return (loss * mask).sum() / mask.sum().clamp(min=1)


@AGGREGATIONS.register("seq-mean-token-mean")
def seq_mean_token_mean(loss: torch.Tensor, mask: torch.Tensor, *, group_size: int = 1) -> torch.Tensor:
    """mean_i (sum_t l_{i,t} M_{i,t} / |o_i|): original GRPO (arXiv 2402.03300). Each token of a
    sequence of length |o_i| weighs 1/|o_i|, so long sequences get less per-token push (length bias).

    >>> seq_mean_token_mean(torch.tensor([[1., 1., 1.], [4., 0., 0.]]), torch.tensor([[1., 1., 1.], [1., 0., 0.]]))
    tensor(2.5000)
    """
    per_seq = (loss * mask).sum(-1) / mask.sum(-1).clamp(min=1)  # (B,)
    return per_seq.mean()
