"""Advantage estimators: rewards of G completions per prompt -> one advantage per completion.

Every entry has the signature ``fn(rewards, group_size, *, <hyper>) -> adv`` on ``(B,)`` tensors with
the ``B = P * G`` rows of each prompt's group contiguous.
"""

from __future__ import annotations

import torch

from rlnb.algos.registry import Registry

ADVANTAGES = Registry("advantage estimator")


def _groups(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """View ``(B,)`` rewards as ``(P, G)``."""
    if rewards.dim() != 1 or rewards.numel() % group_size:
        raise ValueError(
            f"rewards: expected a 1-D tensor whose length is a multiple of group_size={group_size}, "
            f"got shape {tuple(rewards.shape)}"
        )
    return rewards.view(-1, group_size)


@ADVANTAGES.register("grpo")
def grpo(rewards: torch.Tensor, group_size: int, *, unbiased: bool = True, eps: float = 1e-6) -> torch.Tensor:
    """GRPO (DeepSeekMath, arXiv 2402.03300): A_i = (r_i - mean_G r) / (std_G r + eps).

    Shapes: rewards (B,), returns (B,).
    Convention: ``unbiased=True`` divides by G-1 (torch's and TRL's default); ``eps`` 1e-6 (verl),
    TRL uses 1e-4. A group whose rewards are all equal gets A = 0 (numerator is 0). A singleton group
    (G = 1) has no spread: we define its advantage as 0.

    >>> grpo(torch.tensor([1., 0., 0., 0.]), 4)
    tensor([ 1.5000, -0.5000, -0.5000, -0.5000])
    """
    r = _groups(rewards.float(), group_size)  # (P, G)
    if group_size == 1:
        return torch.zeros_like(rewards, dtype=torch.float32)
    centred = r - r.mean(dim=1, keepdim=True)
    std = r.std(dim=1, keepdim=True, unbiased=unbiased)
    return (centred / (std + eps)).reshape(-1)
