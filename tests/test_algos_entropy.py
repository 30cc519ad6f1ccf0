"""Entropy bonus and the adaptive-coefficient thermostat."""

import functools

import pytest
import torch

from rlnb.algos import AGGREGATIONS, ENTROPY_BONUSES, EntropyThermostat, entropy_bonus, top_entropy_mask

TRL, VERL = ENTROPY_BONUSES["pushed-token-mean"], ENTROPY_BONUSES["loss-aggregation"]


def test_entropy_bonus_by_hand():
    H = torch.tensor([[1.0, 2.0, 9.0], [3.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    # token-mean of valid entries (1 + 2 + 3) / 3 = 2, whatever the loss's aggregation (TRL)
    seq = functools.partial(AGGREGATIONS["seq-mean-token-mean"], group_size=1)
    assert entropy_bonus(H, mask, entropy_coef=0.1).item() == pytest.approx(-0.2)
    assert entropy_bonus(H, mask, seq, entropy_coef=0.1).item() == pytest.approx(-0.2)
    # verl: the loss's aggregation, seq-mean-token-mean (1.5 + 3) / 2
    assert entropy_bonus(H, mask, seq, entropy_coef=0.1, rule=VERL).item() == pytest.approx(-0.1 * (1.5 + 3) / 2)
    assert entropy_bonus(H, mask).item() == 0.0


def test_entropy_bonus_follows_trl_over_the_top_entropy_mask():
    """The issue's case: token-mean, H = [[.1, .9], [.5, .3]], q = 0.5, coef 1. TRL: -(0.9 + 0.5) / 2 = -0.70,
    dL/dH -0.5 on the two pushed tokens and 0 elsewhere; verl's rule (every valid token): -0.45, -0.25 each."""
    H = torch.tensor([[0.1, 0.9], [0.5, 0.3]], requires_grad=True)
    m = torch.ones(2, 2)
    E = top_entropy_mask(H, m, top_entropy_quantile=0.5)
    assert E.tolist() == [[False, True], [True, False]]                # tau = quantile 0.5 = 0.4
    trl = entropy_bonus(H, m, None, E, entropy_coef=1.0)
    (g,) = torch.autograd.grad(trl, H)
    assert trl.item() == pytest.approx(-0.70)
    torch.testing.assert_close(g, torch.tensor([[0.0, -0.5], [-0.5, 0.0]]))
    verl = entropy_bonus(H, m, AGGREGATIONS["token-mean"], E, entropy_coef=1.0, rule=VERL)
    (g,) = torch.autograd.grad(verl, H)
    assert verl.item() == pytest.approx(-0.45)
    torch.testing.assert_close(g, torch.full((2, 2), -0.25))


def test_entropy_bonus_under_seq_mean_is_a_token_mean():
    """seq-mean-token-mean, lengths 3 and 1, no mask: TRL -0.45 (token mean), verl -0.40 (mean of row means)."""
    H = torch.tensor([[0.1, 0.2, 0.3], [0.6, 9.0, 9.0]])
    m = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    seq = functools.partial(AGGREGATIONS["seq-mean-token-mean"], group_size=1)
    assert entropy_bonus(H, m, seq, entropy_coef=1.0).item() == pytest.approx(-(0.1 + 0.2 + 0.3 + 0.6) / 4)
    assert entropy_bonus(H, m, seq, entropy_coef=1.0, rule=VERL).item() == pytest.approx(-(0.2 + 0.6) / 2)
    assert TRL(H, m, torch.zeros(2, 3)).item() == 0.0                 # no pushed token: 0, not NaN


def test_entropy_bonus_errors_name_the_argument():
    H, m = torch.ones(2, 2), torch.ones(2, 2)
    with pytest.raises(ValueError, match="^pushed: expected shape"):
        entropy_bonus(H, m, None, torch.ones(2, 3), entropy_coef=0.1)
    with pytest.raises(TypeError, match="^rule: "):
        entropy_bonus(H, m, entropy_coef=0.1, rule="trl")


def test_entropy_bonus_gradient_raises_entropy():
    H = torch.tensor([[0.5, 0.7]], requires_grad=True)
    entropy_bonus(H, torch.ones(1, 2), entropy_coef=0.2).backward()
    assert torch.all(H.grad < 0)                                       # descending the loss raises H


def test_thermostat_rises_below_target_to_the_cap():
    th = EntropyThermostat(target=0.5, coef=0.0, delta=0.01, coef_min=0.0, coef_max=0.035)
    coefs = []
    for _ in range(6):
        th.update(0.2)
        coefs.append(th.coef)
    assert coefs == [0.01, 0.02, 0.03, 0.035, 0.035, 0.035]


def test_thermostat_falls_above_target_to_the_floor_and_gates_the_bonus():
    th = EntropyThermostat(target=0.5, coef=0.02, delta=0.015, coef_min=0.001, coef_max=0.05)
    alphas = [th.update(0.9) for _ in range(3)]
    assert alphas == [0.0, 0.0, 0.0]                                   # above target: bonus off
    assert th.coef == 0.001
    assert th.update(0.5) == 0.001 and th.coef == 0.001                # at the target: applied, unchanged


def test_thermostat_without_gate_always_applies_the_coefficient():
    th = EntropyThermostat(target=0.5, coef=0.02, delta=0.01, coef_max=0.05, gate=False)
    assert th.update(0.9) == 0.02 and th.coef == 0.01


def test_thermostat_stays_within_bounds_under_any_sequence():
    g = torch.Generator().manual_seed(0)
    th = EntropyThermostat(target=0.3, coef=0.002, delta=0.001, coef_min=0.0005, coef_max=0.004)
    for e in torch.rand(500, generator=g).tolist():
        alpha = th.update(e)
        assert 0.0005 <= th.coef <= 0.004
        assert alpha == 0.0 or 0.0005 <= alpha <= 0.004


def test_thermostat_rejects_a_start_outside_its_range():
    with pytest.raises(ValueError, match="coef"):
        EntropyThermostat(coef=1.0, coef_max=0.5)


# --- top-entropy token mask (Beyond the 80/20 rule, arXiv 2506.01939; TRL's top_entropy_quantile) -----

def test_top_entropy_mask_by_hand():
    H = torch.arange(11, dtype=torch.float32).view(1, 11) / 10        # 0.0 .. 1.0, all valid
    mask = torch.ones(1, 11)
    keep = top_entropy_mask(H, mask, top_entropy_quantile=0.2)        # tau = quantile 0.8 = 0.8
    assert keep.flatten().tolist() == [False] * 8 + [True] * 3
    assert torch.equal(top_entropy_mask(H, mask, top_entropy_quantile=1.0), mask.bool())
    assert top_entropy_mask(H, mask, top_entropy_quantile=0.0).flatten().tolist() == [False] * 10 + [True]


def test_top_entropy_mask_ignores_padding_for_the_threshold_and_the_result():
    H = torch.tensor([[0.1, 0.2, 50.0], [0.3, 0.4, 60.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 0]])
    keep = top_entropy_mask(H, mask, top_entropy_quantile=0.5)        # valid 0.1..0.4: tau = 0.25
    assert keep.tolist() == [[False, False, False], [True, True, False]]
    assert not top_entropy_mask(H, torch.zeros(2, 3), top_entropy_quantile=0.5).any()


def test_top_entropy_mask_matches_trl():
    from unittest import mock

    trl_trainer = pytest.importorskip("trl.trainer.grpo_trainer", reason="the TRL comparison needs trl")
    fake = mock.Mock()                                                 # one process: gather is the identity
    fake.accelerator.pad_across_processes = lambda x, dim, pad_index: x
    fake.accelerator.gather = lambda x: x
    g = torch.Generator().manual_seed(0)
    for q in (0.05, 0.2, 0.5, 0.9):
        H = torch.rand(5, 9, generator=g) * 3
        mask = (torch.rand(5, 9, generator=g) > 0.25).float()
        theirs = trl_trainer.GRPOTrainer.get_high_entropy_mask(fake, H, mask, 1 - q)
        assert torch.equal(top_entropy_mask(H, mask, top_entropy_quantile=q), theirs), q


def test_top_entropy_mask_rejects_bad_input():
    with pytest.raises(ValueError, match="top_entropy_quantile"):
        top_entropy_mask(torch.ones(1, 2), torch.ones(1, 2), top_entropy_quantile=1.5)
    with pytest.raises(ValueError, match="entropy, mask"):
        top_entropy_mask(torch.ones(1, 2), torch.ones(1, 3), top_entropy_quantile=0.5)
