"""Clip-Cov, KL-Cov (arXiv 2505.22617) and GMPO (arXiv 2507.20673) against hand values and invariants.

The generic loss invariants (weight = -autograd gradient, masked positions, REINFORCE at ratio 1, finite
outputs) run over every entry in test_algos_losses.py; here the parts that are particular to these three.
"""

import math

import pytest
import torch

from rlnb.algos import AGGREGATIONS
from rlnb.algos.losses import geo_mean, ppo_clip
from rlnb.algos.losses_covariance import clip_cov, kl_cov, token_cov

F64 = torch.float64


def _batch(seed=0, B=6, T=7, spread=0.4):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(B, T, generator=g, dtype=F64) * 3                # log-probs of the sampled tokens
    logp = old + spread * torch.randn(B, T, generator=g, dtype=F64)
    adv = torch.randn(B, generator=g, dtype=F64) * 2
    mask = torch.ones(B, T, dtype=F64)
    mask[1, 4:] = 0
    mask[4, 2:] = 0
    return logp, old, adv, mask


# --- the covariance score ---------------------------------------------------------------------------

def test_token_cov_by_hand_uses_only_valid_tokens():
    logp = torch.tensor([[-1.0, -3.0, 50.0], [-2.0, -2.0, -2.0]])
    A = torch.tensor([[2.0, 2.0, 2.0], [-1.0, -1.0, -1.0]])
    valid = torch.tensor([[1, 1, 0], [1, 0, 0]]).bool()
    # valid: logp -1, -3, -2 (mean -2); A 2, 2, -1 (mean 1)
    cov = token_cov(logp, A, valid)
    torch.testing.assert_close(cov[valid], torch.tensor([1.0 * 1.0, 1.0 * -1.0, -2.0 * 0.0]))
    assert torch.isinf(cov[~valid]).all() and (cov[~valid] < 0).all()


# --- Clip-Cov ----------------------------------------------------------------------------------------

def _band(logp, old, adv, mask, lb, ub, **ppo):
    """Candidates by the definition: valid, not clipped by PPO, lb < Cov < ub."""
    out = ppo_clip(logp, old, adv, mask, **ppo)
    A = adv[:, None].expand_as(logp)
    cov = token_cov(logp, A, mask.bool())
    return mask.bool() & ~(out.clipped_low | out.clipped_high) & (cov > lb) & (cov < ub), cov


def test_clip_cov_detaches_the_largest_band_tokens_and_nothing_else():
    logp, old, adv, mask = _batch(1)
    lb, ub, ratio = -0.5, 0.8, 0.1                                     # a band with several candidates
    band, cov = _band(logp, old, adv, mask, lb, ub)
    n = max(1, int(ratio * int(mask.sum())))                           # 37 valid tokens -> 3
    assert n == 3 and int(band.sum()) > n
    out = clip_cov(logp, old, adv, mask, clip_cov_ratio=ratio, clip_cov_lb=lb, clip_cov_ub=ub)
    ppo = ppo_clip(logp, old, adv, mask)
    cut = (out.clipped_low | out.clipped_high) & ~(ppo.clipped_low | ppo.clipped_high)
    expected = cov.masked_fill(~band, -math.inf).flatten().argsort(descending=True)[:n]
    assert sorted(torch.nonzero(cut.flatten()).flatten().tolist()) == sorted(expected.tolist())
    assert torch.all(out.weight[cut] == 0) and torch.all(out.loss[cut] == 0)
    torch.testing.assert_close(out.loss[~cut], ppo.loss[~cut])          # every other token is plain PPO
    torch.testing.assert_close(out.weight[~cut], ppo.weight[~cut])


def test_clip_cov_with_an_empty_band_is_ppo_clip():
    logp, old, adv, mask = _batch(2)
    out = clip_cov(logp, old, adv, mask, clip_cov_lb=1e8, clip_cov_ub=1e9)
    ppo = ppo_clip(logp, old, adv, mask)
    for a, b in zip(out, ppo):
        assert torch.equal(a, b)


def test_clip_cov_never_picks_a_token_ppo_already_clipped():
    """A wide band and ratio 1: every token PPO left alone is cut (loss 0); PPO-clipped tokens keep their
    clipped loss value, so the covariance rule did not pick them."""
    logp, old, adv, mask = _batch(3, spread=1.5)                       # many PPO-clipped tokens
    ppo = ppo_clip(logp, old, adv, mask)
    clipped = ppo.clipped_low | ppo.clipped_high
    unclipped = mask.bool() & ~clipped
    assert clipped.any() and unclipped.any()
    out = clip_cov(logp, old, adv, mask, clip_cov_ratio=1.0, clip_cov_lb=-1e9, clip_cov_ub=1e9)
    assert torch.all(out.loss[unclipped] == 0) and torch.all(out.weight[mask.bool()] == 0)
    torch.testing.assert_close(out.loss[clipped], ppo.loss[clipped])
    assert torch.all(ppo.loss[clipped] != 0)


def test_clip_cov_generator_draws_uniformly_from_the_band_and_leaves_the_global_stream_alone():
    logp, old, adv, mask = _batch(1)
    lb, ub, ratio = -0.5, 0.8, 0.03                                    # n = 1
    band, _ = _band(logp, old, adv, mask, lb, ub)
    counts = torch.zeros_like(mask)
    state = torch.get_rng_state()
    g = torch.Generator().manual_seed(0)
    for _ in range(600):
        out = clip_cov(logp, old, adv, mask, g, clip_cov_ratio=ratio, clip_cov_lb=lb, clip_cov_ub=ub)
        counts += (out.weight == 0) & (adv[:, None] != 0) & band
    assert torch.equal(torch.get_rng_state(), state)                   # only the generator was drawn from
    assert counts.sum() == 600 and torch.all(counts[~band] == 0)      # exactly one per call, always in the band
    expected = 600 / int(band.sum())
    assert counts[band].min() > expected / 2 and counts[band].max() < expected * 1.6
    a = clip_cov(logp, old, adv, mask, torch.Generator().manual_seed(7), clip_cov_lb=lb, clip_cov_ub=ub)
    b = clip_cov(logp, old, adv, mask, torch.Generator().manual_seed(7), clip_cov_lb=lb, clip_cov_ub=ub)
    assert torch.equal(a.weight, b.weight)


def test_clip_cov_rejects_bad_settings():
    logp, old, adv, mask = _batch()
    with pytest.raises(ValueError, match="clip_cov_lb"):
        clip_cov(logp, old, adv, mask, clip_cov_lb=5.0, clip_cov_ub=1.0)
    with pytest.raises(ValueError, match="clip_cov_ratio"):
        clip_cov(logp, old, adv, mask, clip_cov_ratio=0.0)


# --- KL-Cov ------------------------------------------------------------------------------------------

def test_kl_cov_penalises_exactly_the_top_covariance_tokens():
    logp, old, adv, mask = _batch(4)
    ratio, coef = 0.2, 0.7
    n = int(ratio * int(mask.sum()))                                   # 37 valid tokens -> 7
    cov = token_cov(logp, adv[:, None].expand_as(logp), mask.bool())
    top = torch.zeros(mask.numel(), dtype=torch.bool)
    top[cov.flatten().argsort(descending=True)[:n]] = True
    top = top.view_as(mask)
    out = kl_cov(logp, old, adv, mask, kl_cov_ratio=ratio, kl_cov_coef=coef)
    d, A = logp - old, adv[:, None]
    expected = (-A * d.exp() + coef * d.abs() * top) * mask
    torch.testing.assert_close(out.loss, expected)
    torch.testing.assert_close(out.weight, (A * d.exp() - coef * d.sign() * top) * mask)
    assert not out.clipped_low.any() and not out.clipped_high.any()


def test_kl_cov_without_penalty_is_the_unclipped_surrogate():
    logp, old, adv, mask = _batch(5, spread=2.0)
    out = kl_cov(logp, old, adv, mask, kl_cov_coef=0.0)
    torch.testing.assert_close(out.loss, -adv[:, None] * (logp - old).exp() * mask)


def test_kl_cov_penalty_pulls_the_ratio_back_toward_one():
    """On a selected token the penalty's gradient opposes the move away from the rollout policy."""
    logp = torch.tensor([[0.3, -0.3]], dtype=F64)                      # ratio above and below 1
    adv = torch.tensor([[0.0, 0.0]], dtype=F64)                        # no policy-gradient push at all
    out = kl_cov(logp, torch.zeros_like(logp), adv, torch.ones_like(logp), kl_cov_ratio=1.0, kl_cov_coef=2.0)
    assert out.weight.tolist() == [[-2.0, 2.0]]                        # -coef sign(log rho): back toward 0


# --- GMPO (geo_mean) ---------------------------------------------------------------------------------

def _gmpo_objective(logp, old, adv, mask, eps_low, eps_high):
    """mean_i -A_i exp(mean_t c_t) written directly, sequence-level (autograd through everything)."""
    d = logp - old
    c = torch.where(adv[:, None] > 0, torch.minimum(d, torch.tensor(eps_high, dtype=F64)),
                    torch.maximum(d, torch.tensor(-eps_low, dtype=F64)))
    s = torch.exp((c * mask).sum(-1) / mask.sum(-1))
    return (-adv * s).mean(), s


@pytest.mark.parametrize("spread", [0.05, 0.6])
def test_geo_mean_with_seq_mean_equals_the_sequence_objective_value_and_gradient(spread):
    logp, old, adv, mask = _batch(6, spread=spread)
    lp1, lp2 = logp.clone().requires_grad_(True), logp.clone().requires_grad_(True)
    out = geo_mean(lp1, old, adv, mask, eps_low=0.3, eps_high=0.2)
    value = AGGREGATIONS["seq-mean-token-mean"](out.loss, mask)
    value.backward()
    direct, s = _gmpo_objective(lp2, old, adv, mask, 0.3, 0.2)
    direct.backward()
    torch.testing.assert_close(value, direct)
    torch.testing.assert_close(lp1.grad, lp2.grad)
    torch.testing.assert_close(out.ratio[:, 0], s.detach())
    if spread > 0.5:
        assert (out.clipped_low | out.clipped_high).any()


def test_geo_mean_clip_is_one_sided_like_ppo():
    # log-ratios 1.0 and -1.0 for A > 0 and A < 0: only the move in A's direction is clipped
    lp = torch.tensor([[1.0, -1.0], [1.0, -1.0]], dtype=F64)
    out = geo_mean(lp, torch.zeros_like(lp), torch.tensor([1.0, -1.0], dtype=F64), torch.ones_like(lp))
    assert out.clipped_high.tolist() == [[True, False], [False, False]]
    assert out.clipped_low.tolist() == [[False, False], [False, True]]
    torch.testing.assert_close(out.ratio[:, 0], torch.tensor([math.exp(-0.3), math.exp(0.3)], dtype=F64))
    assert out.weight[0, 1] != 0 and out.weight[1, 0] != 0             # the other direction keeps its gradient


def test_geo_mean_ratio_is_bounded_and_below_the_arithmetic_mean():
    logp, old, adv, mask = _batch(7, spread=3.0)
    out = geo_mean(logp, old, adv, mask)
    s = out.ratio[:, 0]
    assert torch.all(s[adv > 0] <= math.exp(0.4) + 1e-12) and torch.all(s[adv < 0] >= math.exp(-0.4) - 1e-12)
    wide = geo_mean(logp, old, adv, mask, eps_low=1e3, eps_high=1e3)   # nothing clipped: AM-GM
    arith = ((logp - old).exp() * mask).sum(-1) / mask.sum(-1)
    assert torch.all(wide.ratio[:, 0] <= arith + 1e-12)
    spike = logp.clone()
    spike[0, 0] += 5.0                                                 # one outlier token
    moved = geo_mean(spike, old, adv, mask, eps_low=1e3, eps_high=1e3).ratio[0, 0] / wide.ratio[0, 0]
    assert math.isclose(moved.item(), math.exp(5.0 / 7), rel_tol=1e-12)  # exp(5 / |o|), not the 148x of a ratio


def test_recipes_refuse_an_empty_covariance_band_when_made():
    from rlnb.recipe import Recipe

    assert Recipe(loss="clip_cov", clip_cov_lb=2.0).hyperparameters()["loss"]["clip_cov_ub"] == 5.0
    with pytest.raises(ValueError, match="^clip_cov_lb: expected less than clip_cov_ub=5.0"):
        Recipe(loss="clip_cov", clip_cov_lb=6.0)
    with pytest.raises(ValueError, match=r"^kl_cov_ratio: expected a number in \(0, 1\]"):
        Recipe(loss="kl_cov", kl_cov_ratio=0.0)
