"""Critic helpers: clipped value loss and the value head."""

import pytest
import torch

from rlnb.algos import ValueHead, value_loss


def test_value_loss_by_hand():
    values = torch.tensor([[1.0, 0.1, -1.0, 5.0]])
    old = torch.zeros(1, 4)
    returns = torch.tensor([[1.0, 1.0, 0.0, 5.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    out = value_loss(values, old, returns, mask, cliprange_value=0.2)
    # tok0: V_clip .2 -> max(0, .64)/2; tok1: unclipped .81/2; tok2: V_clip -.2 -> max(1, .04)/2; tok3 masked
    torch.testing.assert_close(out.loss, torch.tensor([[0.32, 0.405, 0.5, 0.0]]))
    assert out.clipped.tolist() == [[True, False, False, False]]
    plain = value_loss(values, old, returns, mask, cliprange_value=None)
    torch.testing.assert_close(plain.loss, torch.tensor([[0.0, 0.405, 0.5, 0.0]]))


def test_value_loss_gradient_is_cut_only_where_clipped_branch_wins():
    values = torch.tensor([[1.0, 0.1, -1.0]], requires_grad=True)
    out = value_loss(values, torch.zeros(1, 3), torch.tensor([[1.0, 1.0, 0.0]]), torch.ones(1, 3))
    out.loss.sum().backward()
    torch.testing.assert_close(values.grad, torch.tensor([[0.0, 0.1 - 1.0, -1.0]]))  # (V - R) where unclipped


def test_value_loss_shape_check():
    with pytest.raises(ValueError, match="returns"):
        value_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 4), torch.ones(2, 3))


def test_value_head_shapes_dtype_and_zero_init():
    head = ValueHead(8)
    h = torch.randn(2, 5, 8, dtype=torch.bfloat16)
    v = head(h)
    assert v.shape == (2, 5) and v.dtype == torch.float32 and torch.all(v == 0)


def test_value_head_learns_a_linear_target():
    torch.manual_seed(0)
    head = ValueHead(4)
    h = torch.randn(64, 3, 4)
    target = h @ torch.tensor([1.0, -2.0, 0.5, 0.0]) + 0.3
    opt = torch.optim.Adam(head.parameters(), lr=0.05)
    for _ in range(300):
        opt.zero_grad()
        loss = ((head(h) - target) ** 2).mean()
        loss.backward()
        opt.step()
    assert loss.item() < 1e-3
