"""The last verl 0.9.1 entries as pure functions: gdpo, gpg, the optimal token baselines, dro, k1+ and abs+.
Hand values sit in the doctests; here are invariants, the edges, and the errors."""

import pytest
import torch

from rlnb.algos import ADVANTAGES, KL_ESTIMATORS, POLICY_LOSSES, sum_pi_squared
from rlnb.algos.advantages_normalised import gdpo, gpg

F64 = torch.float64


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


# --- k1+ and abs+: the value of k1 / |d|, the gradient of k2 ----------------------------------------------

@pytest.mark.parametrize("name, value", [("k1+", lambda d: d), ("abs+", lambda d: d.abs())])
def test_straight_through_estimators_have_k2s_gradient_and_their_own_value(name, value):
    ref = torch.randn(4, 6, generator=_gen(), dtype=F64)
    x = (ref + torch.randn(4, 6, generator=_gen(1), dtype=F64)).requires_grad_()
    y = KL_ESTIMATORS[name](x, ref)
    torch.testing.assert_close(y.detach(), value(x.detach() - ref))
    (g,) = torch.autograd.grad(y.sum(), x)
    (g2,) = torch.autograd.grad(KL_ESTIMATORS["k2"](x, ref).sum(), x)
    torch.testing.assert_close(g, g2)                                  # d, not k1's 1 nor abs's sign(d)
    base = KL_ESTIMATORS[name.rstrip("+")]
    (g_own,) = torch.autograd.grad(base(x, ref).sum(), x)
    assert not torch.allclose(g, g_own)


@pytest.mark.parametrize("name", ["k1+", "abs+"])
def test_straight_through_gradient_averages_to_the_gradient_of_the_kl(name):
    """Exact by enumeration over a categorical pi(theta): sum_x pi(x) grad est(x) = grad KL(pi || ref)."""
    theta = torch.tensor([0.3, -1.0, 0.8, 0.1], dtype=F64, requires_grad=True)
    ref = torch.log_softmax(torch.tensor([0.0, 0.5, -0.4, 1.2], dtype=F64), 0)
    logp = torch.log_softmax(theta, 0)
    (want,) = torch.autograd.grad((logp.exp() * (logp - ref)).sum(), theta, retain_graph=True)
    (got,) = torch.autograd.grad((logp.exp().detach() * KL_ESTIMATORS[name](logp, ref)).sum(), theta, retain_graph=True)
    torch.testing.assert_close(got, want)
    (k1_own,) = torch.autograd.grad((logp.exp().detach() * KL_ESTIMATORS["k1"](logp, ref)).sum(), theta)
    torch.testing.assert_close(k1_own, torch.zeros(4, dtype=F64), atol=1e-12, rtol=0)  # k1 alone pulls nothing


# --- dro ------------------------------------------------------------------------------------------------

def test_dro_weight_is_minus_the_gradient_and_starts_as_pg():
    old = torch.randn(3, 5, generator=_gen(), dtype=F64)
    adv, mask = torch.tensor([1.0, -0.5, 2.0], dtype=F64), torch.tensor([[1, 1, 1, 0, 0], [1] * 5, [1, 1, 0, 0, 0]])
    x = (old + 0.3 * torch.randn(3, 5, generator=_gen(1), dtype=F64)).requires_grad_()
    out = POLICY_LOSSES["dro"](x, old, adv, mask, dro_beta=0.7)
    (g,) = torch.autograd.grad(out.loss.sum(), x)
    torch.testing.assert_close(out.weight, -g)
    assert (out.loss[mask == 0] == 0).all() and not out.clipped_low.any() and not out.clipped_high.any()
    x0 = old.clone().requires_grad_()                                  # at the rollout policy: pg's gradient
    (g0,) = torch.autograd.grad(POLICY_LOSSES["dro"](x0, old, adv, mask, dro_beta=1.0).loss.sum(), x0)
    (gpg_,) = torch.autograd.grad(POLICY_LOSSES["pg"](x0, old, adv, mask).loss.sum(), x0)
    torch.testing.assert_close(g0, gpg_)


@pytest.mark.parametrize("beta", [0.25, 1.0, 4.0])
def test_dro_each_tokens_optimum_is_at_log_ratio_a_over_beta(beta):
    old, adv = torch.tensor([[-1.0, -2.0]], dtype=F64), torch.tensor([0.8], dtype=F64)
    at = (old + adv / beta).requires_grad_()
    (g,) = torch.autograd.grad(POLICY_LOSSES["dro"](at, old, adv, torch.ones(1, 2), dro_beta=beta).loss.sum(), at)
    assert g.abs().max() < 1e-12
    for step in (-0.1, 0.1):                                           # a minimum: the loss rises either side
        lo = POLICY_LOSSES["dro"](at.detach() + step, old, adv, torch.ones(1, 2), dro_beta=beta).loss
        assert (lo > POLICY_LOSSES["dro"](at.detach(), old, adv, torch.ones(1, 2), dro_beta=beta).loss).all()


@pytest.mark.parametrize("bad", [0.0, -1.0, True, "1"])
def test_dro_rejects_a_non_positive_beta(bad):
    with pytest.raises(ValueError, match="^dro_beta: expected a positive float"):
        POLICY_LOSSES["dro"](torch.zeros(1, 2), torch.zeros(1, 2), torch.ones(1), torch.ones(1, 2), dro_beta=bad)


# --- gpg ------------------------------------------------------------------------------------------------

def test_gpg_is_dr_grpo_scaled_by_b_over_the_informative_rows():
    r = torch.tensor([1., 0., 1., 0., 1., 1., 1., 1., 0., 0., 0., 0., .5, 0., 0., 1.])
    adv = gpg(r, 4, gpg_alpha_nonzero=False)                           # the paper's alpha = B / (B - M)
    torch.testing.assert_close(adv, 16 / 8 * ADVANTAGES["dr_grpo"](r, 4))  # 2 of 4 groups are saturated
    assert (adv.view(-1, 4).sum(1).abs() < 1e-6).all()
    mixed = torch.tensor([1., 0., 0., 2., 3., 1.])                     # nothing saturated: alpha = 1
    torch.testing.assert_close(gpg(mixed, 3, gpg_alpha_nonzero=False), ADVANTAGES["dr_grpo"](mixed, 3))
    torch.testing.assert_close(gpg(r, 4), 16 / 8 * ADVANTAGES["dr_grpo"](r, 4))  # verl's count: 8 nonzero
    r3 = torch.tensor([1., 0., 0., 0., 1., 1., 1., 1.])                # 5 nonzero, 4 informative
    assert not torch.allclose(gpg(r3, 4), gpg(r3, 4, gpg_alpha_nonzero=False))


def test_gpg_default_alpha_is_verls_count_of_nonzero_rewards():
    """The issue's case: B = 16, 7 nonzero rewards: alpha = 16/7, row 0 gets 16/7 * 0.75 = 1.714 (paper: 1.5)."""
    r = torch.tensor([1., 0., 0., 0., 1., 1., 1., 1., 1., 0., 1., 0., 0., 0., 0., 0.])
    assert gpg(r, 4)[0].item() == pytest.approx(16 / 7 * 0.75) == pytest.approx(1.7142857)
    assert gpg(r, 4, gpg_alpha_nonzero=False)[0].item() == pytest.approx(1.5)
    assert ADVANTAGES["gpg"] is gpg and gpg(r, 4)[8].item() == pytest.approx(16 / 7 * 0.5)


def test_gpg_singletons_follow_verl_alpha_r_unless_singleton_zero():
    r = torch.tensor([1., 0., 3.])                                     # G = 1: mean 0, alpha = 3 / 2 nonzero
    torch.testing.assert_close(gpg(r, 1), torch.tensor([1.5, 0., 4.5]))
    torch.testing.assert_close(gpg(r, 1, gpg_alpha_nonzero=False), torch.tensor([1.5, 0., 4.5]))  # same count
    assert torch.equal(gpg(r, 1, singleton_zero=True), torch.zeros(3))


def test_gpg_edges_all_saturated_groups_are_zero():
    assert torch.equal(gpg(torch.ones(8), 4), torch.zeros(8))          # alpha's denominator clamped to 1
    assert torch.equal(gpg(torch.ones(8), 4, gpg_alpha_nonzero=False), torch.zeros(8))
    assert torch.equal(gpg(torch.zeros(8), 4), torch.zeros(8))


# --- gdpo -----------------------------------------------------------------------------------------------

def _whiten_rows(x):
    return (x - x.mean()) / torch.sqrt(x.var(unbiased=True) + 1e-8)


def test_gdpo_with_one_part_is_whitened_grpo_and_each_part_is_scale_free():
    r = torch.rand(12, generator=_gen(), dtype=F64)
    torch.testing.assert_close(gdpo(r, 4, {"r": r}), _whiten_rows(ADVANTAGES["grpo"](r, 4)))
    fmt = (torch.rand(12, generator=_gen(1), dtype=F64) > 0.5).to(F64)
    parts, w = {"c": r, "f": fmt}, torch.tensor([1.0, 0.3], dtype=F64)
    scaled = {"c": 7 * r + 3, "f": fmt}                                # a part's scale and offset do not matter
    torch.testing.assert_close(gdpo(r, 4, scaled, w, eps=1e-12), gdpo(r, 4, parts, w, eps=1e-12))  # (up to eps)
    const = {**parts, "z": torch.full((12,), 5.0, dtype=F64)}          # a constant part adds nothing
    torch.testing.assert_close(gdpo(r, 4, const, torch.tensor([1.0, 0.3, 9.0], dtype=F64)), gdpo(r, 4, parts, w))
    torch.testing.assert_close(gdpo(r, 4, parts, w.expand(12, 2)), gdpo(r, 4, parts, w))  # (B, K) weights


def test_gdpo_keeps_the_weights_apart_where_grpo_on_the_sum_merges_them():
    correct, fmt = torch.tensor([1., 0., 1., 1.]), torch.tensor([1., 1., 0., 1.])
    grpo = ADVANTAGES["grpo"](correct + 0.5 * fmt, 2)
    assert torch.allclose(grpo[:2].abs(), grpo[2:].abs())             # both pairs look alike to GRPO
    adv = gdpo(correct + 0.5 * fmt, 2, {"correct": correct, "format": fmt}, torch.tensor([1., .5]))
    torch.testing.assert_close(adv[2:].abs(), 0.5 * adv[:2].abs())    # the format pair gets w_fmt times as much


def test_gdpo_with_a_mask_whitens_over_tokens():
    r = torch.rand(8, generator=_gen(), dtype=F64)
    parts = {"c": r, "f": (r > 0.5).to(F64)}
    lengths = torch.tensor([1, 3, 2, 5, 5, 1, 4, 2])
    mask = (torch.arange(5) < lengths[:, None]).to(F64)
    summed = sum(ADVANTAGES["grpo"](p, 4) for p in parts.values())
    tokens = summed.repeat_interleave(lengths)                         # each row once per valid token
    want = (summed - tokens.mean()) / torch.sqrt(tokens.var(unbiased=True) + 1e-8)
    torch.testing.assert_close(gdpo(r, 4, parts, None, mask), want)


def test_gdpo_singletons_follow_verl_whitened_rewards_unless_singleton_zero():
    """G = 1: verl's GRPO takes mean 0 and std 1, so the part is r / (1 + eps), then whitened over the batch:
    rewards [1, 0, 0, 0] -> mean 0.25, std 0.5 (Bessel) -> [1.5, -0.5, -0.5, -0.5]."""
    r = torch.tensor([1., 0., 0., 0.], dtype=F64)
    torch.testing.assert_close(gdpo(r, 1, {"c": r}), torch.tensor([1.5, -.5, -.5, -.5], dtype=F64), atol=1e-6, rtol=0)
    assert torch.equal(gdpo(r, 1, {"c": r}, singleton_zero=True), torch.zeros(4, dtype=F64))


def test_tir_token_baseline_drops_empty_rows_as_verl_does():
    """Lengths [0, 5, 0, 0], rewards [1, .5, 0, 1]: the one non-empty row is a singleton, A = r = 0.5 with or
    without handle_zero_tail; the absolute-position estimator (verl keeps empty rows there) gives 0."""
    m = torch.zeros(4, 5, dtype=F64)
    m[1] = 1
    r, lp, s2 = torch.tensor([1., .5, 0., 1.], dtype=F64), torch.full((4, 5), -0.7, dtype=F64) * m, 0.5 * m
    for tail in (False, True):
        adv = ADVANTAGES["tir_optimal_token_baseline"](r, 4, lp, s2, m, handle_zero_tail=tail)
        torch.testing.assert_close(adv[1], torch.full((5,), 0.5, dtype=F64))
        assert (adv[m == 0] == 0).all()
    plain = ADVANTAGES["optimal_token_baseline"](r, 4, lp, s2, m, handle_zero_tail=False)
    assert plain[1].abs().max() < 1e-6


def test_dro_has_no_silent_default():
    with pytest.raises(ValueError, match="^dro_beta: the loss 'dro' needs"):
        POLICY_LOSSES["dro"](torch.zeros(1, 2), torch.zeros(1, 2), torch.ones(1), torch.ones(1, 2))
    import rlnb
    with pytest.raises(ValueError, match="^dro_beta: "):
        rlnb.recipes.get("grpo", loss="dro")
    assert rlnb.recipes.get("grpo", loss="dro", dro_beta=0.5).hyperparameters()["loss"]["dro_beta"] == 0.5


def test_gdpo_errors_name_the_input():
    r = torch.ones(4)
    with pytest.raises(ValueError, match="^reward_parts: the advantage estimator 'gdpo' needs"):
        gdpo(r, 2)
    with pytest.raises(ValueError, match=r"^reward_parts\['f'\]: expected shape \(4,\)"):
        gdpo(r, 2, {"f": torch.ones(3)})
    with pytest.raises(ValueError, match=r"^reward_weights: expected \(2,\) or \(4, 2\)"):
        gdpo(r, 2, {"c": r, "f": r}, torch.ones(3))
    with pytest.raises(TypeError, match="^reward_parts: expected a non-empty dict"):
        gdpo(r, 2, torch.ones(4))


# --- the optimal token baselines ------------------------------------------------------------------------

def _rollout(B=12, T=6, seed=0):
    g = _gen(seed)
    logits = torch.randn(B, T, 5, generator=g, dtype=F64)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    mask = (torch.arange(T) < lengths[:, None]).to(F64)
    ids = torch.randint(0, 5, (B, T), generator=g)
    logp = torch.log_softmax(logits, -1).gather(-1, ids[..., None])[..., 0] * mask
    return torch.randn(B, generator=g, dtype=F64), logp, sum_pi_squared(logits, mask).to(F64), mask, logits


def test_sum_pi_squared_is_the_collision_probability_and_path_weights_are_nonnegative():
    r, logp, s2, mask, logits = _rollout()
    probs = torch.softmax(logits, -1)
    torch.testing.assert_close(s2, (probs ** 2).sum(-1) * mask)
    w = (1 - 2 * logp.exp() + s2) * mask                               # ||onehot - pi||^2 >= 0
    assert (w >= -1e-12).all()
    assert torch.allclose(sum_pi_squared(torch.zeros(1, 1, 4), torch.ones(1, 1)), torch.tensor([[0.25]]))


@pytest.mark.parametrize("name", ["optimal_token_baseline", "tir_optimal_token_baseline"])
def test_token_baseline_with_equal_weights_and_lengths_is_the_group_mean(name):
    r = torch.tensor([1., 0., 0., 3., 2., 2.], dtype=F64)
    half = torch.full((6, 4), 0.5, dtype=F64)
    adv = ADVANTAGES[name](r, 3, half.log(), half, torch.ones(6, 4, dtype=F64))
    torch.testing.assert_close(adv, ADVANTAGES["dr_grpo"](r, 3)[:, None].expand(6, 4), atol=1e-7, rtol=0)


def test_token_baselines_agree_on_right_padded_masks_and_zero_the_padding():
    r, logp, s2, mask, _ = _rollout()
    for tail in (True, False):
        a = ADVANTAGES["optimal_token_baseline"](r, 3, logp, s2, mask, handle_zero_tail=tail)
        torch.testing.assert_close(a, ADVANTAGES["tir_optimal_token_baseline"](r, 3, logp, s2, mask, handle_zero_tail=tail))
        assert (a[mask == 0] == 0).all() and a.shape == mask.shape


def test_token_baseline_is_equivariant_under_a_shuffle_within_groups():
    r, logp, s2, mask, _ = _rollout()
    perm = torch.cat([torch.randperm(3, generator=_gen(5)) + 3 * i for i in range(4)])
    a = ADVANTAGES["optimal_token_baseline"](r, 3, logp, s2, mask)
    torch.testing.assert_close(ADVANTAGES["optimal_token_baseline"](r[perm], 3, logp[perm], s2[perm], mask[perm]), a[perm])


def test_tir_aligns_the_kth_valid_token_so_tool_tokens_do_not_shift_it():
    r, logp, s2, mask, _ = _rollout(B=6, T=5)
    holes, lp, pi2, where = torch.zeros(6, 8, dtype=F64), torch.zeros(6, 8, dtype=F64), torch.zeros(6, 8, dtype=F64), []
    for i in range(6):                                                 # the same tokens, a tool output of i % 3
        L, gap = int(mask[i].sum()), i % 3                             # tokens after each row's first one
        pos = [0] + list(range(1 + gap, L + gap))
        holes[i, pos], lp[i, pos], pi2[i, pos] = 1.0, logp[i, :L], s2[i, :L]
        where.append(pos)
    got = ADVANTAGES["tir_optimal_token_baseline"](r, 3, lp, pi2, holes)
    want = ADVANTAGES["optimal_token_baseline"](r, 3, logp, s2, mask)  # the rollout without the tool tokens
    for i, pos in enumerate(where):
        torch.testing.assert_close(got[i, pos], want[i, : len(pos)])
    assert (got[holes == 0] == 0).all()
    assert not torch.allclose(ADVANTAGES["optimal_token_baseline"](r, 3, lp, pi2, holes), got)


def test_token_baseline_tail_rule_and_singletons():
    half, mask = torch.full((2, 3), 0.5), torch.tensor([[1., 1., 0.], [1., 1., 1.]])
    on = ADVANTAGES["optimal_token_baseline"](torch.tensor([0., 1.]), 2, half.log() * mask, half * mask, mask)
    off = ADVANTAGES["optimal_token_baseline"](torch.tensor([0., 1.]), 2, half.log() * mask, half * mask, mask,
                                               handle_zero_tail=False)
    assert on[1, 2] == 1 and off[1, 2] == 0 and torch.equal(on[:, :2], off[:, :2])
    tie = torch.ones(2, 3)                                             # two longest rows: nothing is alone
    torch.testing.assert_close(ADVANTAGES["optimal_token_baseline"](torch.tensor([0., 1.]), 2, half.log(), half, tie),
                               torch.tensor([[-.5] * 3, [.5] * 3]))
    r = torch.tensor([1., 0., 3.])                                     # G = 1: no baseline, A = r
    torch.testing.assert_close(ADVANTAGES["optimal_token_baseline"](r, 1, half[:1].expand(3, 3).log(),
                                                                    half[:1].expand(3, 3), torch.ones(3, 3)),
                               r[:, None].expand(3, 3))


@pytest.mark.parametrize("missing", ["old_logp", "sum_pi_squared", "mask"])
def test_token_baseline_names_a_missing_input(missing):
    half = torch.full((2, 3), 0.5)
    inputs = {"old_logp": half.log(), "sum_pi_squared": half, "mask": torch.ones(2, 3), missing: None}
    with pytest.raises(ValueError, match=f"^{missing}: the advantage estimator 'optimal_token_baseline' needs"):
        ADVANTAGES["optimal_token_baseline"](torch.ones(2), 2, **inputs)
    with pytest.raises(ValueError, match=r"^sum_pi_squared: expected shape \(2, 3\)"):
        ADVANTAGES["optimal_token_baseline"](torch.ones(2), 2, half.log(), torch.ones(2, 4), torch.ones(2, 3))
