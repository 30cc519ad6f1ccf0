"""A critic for PPO: a value head on the policy's hidden states and its clipped loss.

Critic-free methods (GRPO, RLOO, ...) never need this. With a critic, per-token advantages come from
``rlnb.algos.advantages.gae`` and the value head is trained with ``value_loss``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from rlnb.core.checks import check_number, check_same_device, check_tensor


class ValueLossOut(NamedTuple):
    loss: torch.Tensor      # (B, T) per-token value loss, zero where mask is 0
    clipped: torch.Tensor   # (B, T) bool: the clipped branch was the larger one (no gradient flows)


def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor, *,
               cliprange_value: float | None = 0.2) -> ValueLossOut:
    """PPO's clipped value loss (as in OpenAI baselines, TRL's ``cliprange_value``, verl's
    ``cliprange_value``):

        V_clip = old_V + clip(V - old_V, -c, c),   loss_t = 1/2 max((V - R)^2, (V_clip - R)^2)

    Shapes: values, old_values, returns, mask (B, T) -> ValueLossOut of (B, T); aggregate it like the
    policy loss and scale by a value coefficient. ``cliprange_value=None`` gives the plain 1/2 (V - R)^2.
    The clip keeps the critic near the values the advantages were computed with.

    >>> out = value_loss(torch.tensor([[1.0, 0.1]]), torch.zeros(1, 2), torch.tensor([[1.0, 1.0]]), torch.ones(1, 2))
    >>> out.loss, out.clipped   # token 0: V_clip = 0.2, 1/2 (0.8)^2 = 0.32 > 0; token 1: 1/2 (0.9)^2
    (tensor([[0.3200, 0.4050]]), tensor([[ True, False]]))
    """
    for name, x in (("values", values), ("old_values", old_values), ("returns", returns)):
        check_tensor(name, x, floating=True, finite=True)
    check_tensor("mask", mask)
    check_same_device(values=values, old_values=old_values, returns=returns, mask=mask)
    if cliprange_value is not None:
        check_number("cliprange_value", cliprange_value, low=0.0, low_open=True)
    if not (values.shape == old_values.shape == returns.shape == mask.shape):
        raise ValueError(f"values, old_values, returns, mask: expected equal shapes, got {tuple(values.shape)}, "
                         f"{tuple(old_values.shape)}, {tuple(returns.shape)}, {tuple(mask.shape)}")
    m = mask.to(values.dtype)
    plain = (values - returns) ** 2                                    # (B, T)
    if cliprange_value is None:
        return ValueLossOut(0.5 * plain * m, torch.zeros_like(mask, dtype=torch.bool))
    v_clip = old_values + (values - old_values).clamp(-cliprange_value, cliprange_value)
    clipped_sq = (v_clip - returns) ** 2
    clipped = (clipped_sq > plain) & mask.bool()
    return ValueLossOut(0.5 * torch.maximum(plain, clipped_sq) * m, clipped)


class ValueHead(nn.Module):
    """V(s_t) = w . h_t + b on the policy's last hidden states: (B, T, H) -> (B, T), in fp32.

    Zero-initialised, so every state starts at value 0 (gamma = lam = 1 then gives A_t = return).

    >>> ValueHead(4)(torch.ones(2, 3, 4)).shape
    torch.Size([2, 3])
    """

    def __init__(self, hidden_size: int):
        super().__init__()
        self.proj = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.proj(hidden_states.float()).squeeze(-1)            # (B, T)
