"""Policy losses: weight = -d loss / d logp against autograd, hand values, clipping behaviour, DPPO masks."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlnb.algos import POLICY_LOSSES, bind, extra_inputs
from rlnb.algos.aggregation import seq_mean_token_mean
from rlnb.algos.losses import cispo, gspo, pg, ppo_clip, sapo
from rlnb.algos.losses_trust_region import bernoulli_kl, dppo_kl, dppo_tv, topk_divergence
from rlnb.recipe import Recipe

F64 = torch.float64


def _batch(seed=0, B=4, T=5, V=7, K=3, spread=0.3):
    """A rollout from one random policy, the current policy a perturbation of it, with top-K records."""
    g = torch.Generator().manual_seed(seed)
    old_logits = torch.randn(B, T, V, generator=g, dtype=F64)
    new_logits = old_logits + spread * torch.randn(B, T, V, generator=g, dtype=F64)
    tokens = torch.multinomial(old_logits.softmax(-1).view(-1, V), 1, generator=g).view(B, T)
    old_all, new_all = old_logits.log_softmax(-1), new_logits.log_softmax(-1)
    ids = old_all.topk(K, dim=-1).indices                              # the rollout's top-K ids
    mask = torch.ones(B, T, dtype=F64)
    mask[1, 3:] = 0
    mask[3, 1:] = 0
    return dict(
        logp=new_all.gather(-1, tokens[..., None]).squeeze(-1),
        old_logp=old_all.gather(-1, tokens[..., None]).squeeze(-1),
        adv=torch.tensor([1.5, -0.7, 0.4, -2.0], dtype=F64),
        mask=mask,
        topk_logp=new_all.gather(-1, ids),
        old_topk_logp=old_all.gather(-1, ids),
    )


NO_DEFAULT = {"dro": {"dro_beta": 1.0}}  # knobs an entry has no default for (as in verl): the tests set them


def _call(fn, b, logp=None, **hyper):
    extras = {k: b[k] for k in extra_inputs(fn)}
    hyper = {**NO_DEFAULT.get(getattr(fn, "registry_name", ""), {}), **hyper}
    return fn(b["logp"] if logp is None else logp, b["old_logp"], b["adv"], b["mask"], **extras, **hyper)


@pytest.mark.parametrize("name", sorted(POLICY_LOSSES))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_weight_is_minus_autograd_gradient(name, seed):
    b = _batch(seed, spread=0.5)
    logp = b["logp"].clone().requires_grad_(True)
    out = _call(POLICY_LOSSES[name], b, logp=logp)
    out.loss.sum().backward()
    torch.testing.assert_close(out.weight, -logp.grad)
    assert not out.weight.requires_grad and not out.ratio.requires_grad


@pytest.mark.parametrize("name", sorted(POLICY_LOSSES))
def test_masked_positions_are_zero_and_never_clipped(name):
    b = _batch(3, spread=2.0)
    out = _call(POLICY_LOSSES[name], b)
    off = ~b["mask"].bool()
    assert torch.all(out.loss[off] == 0) and torch.all(out.weight[off] == 0)
    assert not out.clipped_low[off].any() and not out.clipped_high[off].any()
    assert out.clipped_low.dtype == out.clipped_high.dtype == torch.bool


@pytest.mark.parametrize("name", [n for n in sorted(POLICY_LOSSES) if n not in ("pg", "sapo", "kl_cov", "dro", "vespo")])  # vespo: no clip edge
def test_clipped_tokens_have_zero_weight_except_cispo(name):
    b = _batch(4, spread=3.0)
    out = _call(POLICY_LOSSES[name], b, **({"eps_low": 0.2, "eps_high": 0.2} if name == "gspo" else {}))
    clipped = out.clipped_low | out.clipped_high
    assert clipped.any(), "the test batch must clip something"
    if name == "cispo":
        assert torch.all(out.weight[clipped] != 0)                    # CISPO keeps the gradient
    else:
        assert torch.all(out.weight[clipped] == 0)


@pytest.mark.parametrize("name", sorted(POLICY_LOSSES))
def test_on_policy_gradient_is_reinforce(name):
    """At ratio 1 (one update per batch) every loss's gradient is -A grad logp and nothing is clipped;
    the one exception is Clip-Cov, whose covariance rule does not look at the ratio: the token it detaches
    (n = 1 here; the band is opened wide so it has candidates) is reported as clipped and is the only one
    without the REINFORCE gradient."""
    b = _batch(5)
    b["old_logp"] = b["logp"].clone()
    b["old_topk_logp"] = b["topk_logp"].clone()
    logp = b["logp"].clone().requires_grad_(True)
    out = _call(POLICY_LOSSES[name], b, logp=logp, **({"clip_cov_lb": -1e9} if name == "clip_cov" else {}))
    out.loss.sum().backward()
    clipped = out.clipped_low | out.clipped_high
    assert int(clipped.sum()) == (1 if name == "clip_cov" else 0)
    expected = -b["adv"][:, None] * b["mask"] * ~clipped
    torch.testing.assert_close(logp.grad, expected)


def test_ppo_clip_at_ratio_one_value_is_minus_adv_and_nothing_clipped():
    b = _batch(6)
    out = ppo_clip(b["logp"], b["logp"], b["adv"], b["mask"])
    torch.testing.assert_close(out.loss, -b["adv"][:, None] * b["mask"])
    assert not out.clipped_low.any() and not out.clipped_high.any()


def test_ppo_clip_hand_cases():
    # ratios 1.5, 0.5, 1.5, 0.5 with A = +1, +1, -1, -1 (eps 0.2)
    lp = torch.log(torch.tensor([[1.5, 0.5, 1.5, 0.5]]))
    A = torch.tensor([[1.0, 1.0, -1.0, -1.0]])
    out = ppo_clip(lp, torch.zeros(1, 4), A, torch.ones(1, 4))
    # A>0: max(-1.5, -1.2) = -1.2 clipped; max(-.5, -.8) = -.5 kept. A<0: max(1.5, 1.2) = 1.5 kept; max(.5, .8) = .8 clipped
    torch.testing.assert_close(out.loss, torch.tensor([[-1.2, -0.5, 1.5, 0.8]]))
    assert out.clipped_high.tolist() == [[True, False, False, False]]
    assert out.clipped_low.tolist() == [[False, False, False, True]]
    torch.testing.assert_close(out.weight, torch.tensor([[0.0, 0.5, -1.5, 0.0]]))


def test_cispo_passes_gradient_where_ppo_clip_does_not():
    lp = torch.log(torch.tensor([[1.5, 1.5]]))
    A = torch.tensor([[1.0, 2.0]])
    ppo = ppo_clip(lp, torch.zeros(1, 2), A, torch.ones(1, 2), eps_high=0.28)
    ci = cispo(lp, torch.zeros(1, 2), A, torch.ones(1, 2), eps_high=0.28)
    assert ppo.weight.tolist() == [[0.0, 0.0]]
    torch.testing.assert_close(ci.weight, torch.tensor([[1.28, 2.56]]))  # A * (1 + eps_high)
    assert ci.clipped_high.all()


def test_cispo_absolute_cap_convention():
    lp = torch.log(torch.tensor([[1.5, 7.0, 0.05]]))
    out = cispo(lp, torch.zeros(1, 3), torch.tensor([1.0]), torch.ones(1, 3), eps_high=0.28, cispo_cap=5.0)
    torch.testing.assert_close(out.weight, torch.tensor([[1.5, 5.0, 0.05]]))  # eps_low 1.0: no lower bound
    assert out.clipped_high.tolist() == [[False, True, False]] and not out.clipped_low.any()
    with pytest.raises(ValueError, match="cispo_cap"):
        cispo(lp, torch.zeros(1, 3), torch.tensor([1.0]), torch.ones(1, 3), cispo_cap=-1.0)


def test_dual_clip_bounds_loss_for_negative_advantages():
    ratios = torch.tensor([[0.5, 1.0, 2.0, 3.5, 10.0, 100.0]], dtype=F64)
    A, c = torch.tensor([-2.0], dtype=F64), 3.0
    plain = ppo_clip(ratios.log(), torch.zeros_like(ratios), A, torch.ones_like(ratios))
    dual = ppo_clip(ratios.log(), torch.zeros_like(ratios), A, torch.ones_like(ratios), dual_clip_c=c)
    assert torch.all(dual.loss <= -A * c)
    torch.testing.assert_close(dual.loss[0, 3:], torch.full((3,), 6.0, dtype=F64))  # -A c
    torch.testing.assert_close(dual.loss[0, :3], plain.loss[0, :3])
    assert math.isclose(plain.loss[0, -1].item(), 200.0)               # unbounded without it
    assert dual.clipped_high.tolist() == [[False, False, False, True, True, True]]
    with pytest.raises(ValueError, match="dual_clip_c"):
        ppo_clip(ratios.log(), torch.zeros_like(ratios), A, torch.ones_like(ratios), dual_clip_c=0.5)


def test_gspo_sequence_ratio_is_exp_mean_log_ratio():
    logp = torch.tensor([[0.1, 0.3, -0.1, 9.0], [0.2, 0.2, 0.2, 0.2]], dtype=F64)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]], dtype=F64)
    out = gspo(logp, torch.zeros_like(logp), torch.tensor([1.0, -1.0], dtype=F64), mask, eps_low=0.5, eps_high=0.5)
    s = torch.tensor([math.exp(0.3 / 3), math.exp(0.2)], dtype=F64)
    torch.testing.assert_close(out.ratio, s[:, None].expand(2, 4))


def test_gspo_token_form_gradient_equals_sequence_objective():
    """seq-mean of the token form has the gradient of mean_i max(-A s_i, -A clip(s_i)) with s_i not detached."""
    g = torch.Generator().manual_seed(7)
    old = -torch.rand(3, 5, generator=g, dtype=F64)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 1, 0]], dtype=F64)
    A = torch.tensor([1.0, -0.5, 2.0], dtype=F64)
    base = old + 0.05 * torch.randn(3, 5, generator=g, dtype=F64)
    base[2] = old[2] + 0.3                                             # sequence 2 leaves the clip range
    lp1, lp2 = base.clone().requires_grad_(True), base.clone().requires_grad_(True)
    seq_mean_token_mean(gspo(lp1, old, A, mask, eps_low=0.2, eps_high=0.2).loss, mask).backward()
    s = torch.exp(((lp2 - old) * mask).sum(-1) / mask.sum(-1))
    torch.maximum(-A * s, -A * s.clamp(0.8, 1.2)).mean().backward()
    torch.testing.assert_close(lp1.grad, lp2.grad)
    assert torch.all(lp1.grad[2] == 0)                                 # the clipped sequence


def test_sapo_gate_weight_decays_away_from_one_and_uses_tau_by_sign():
    ratios = torch.tensor([[0.5, 0.9, 1.0, 1.1, 2.0]], dtype=F64)
    out = sapo(ratios.log(), torch.zeros_like(ratios), torch.tensor([1.0], dtype=F64), torch.ones_like(ratios),
               tau_pos=3.0)
    w = out.weight[0]
    gate_slope = w / ratios[0]                                         # f'(rho) = 4 sig (1 - sig), peak 1 at rho 1
    assert w[2] == 1.0 and gate_slope[0] < gate_slope[1] < 1.0 and gate_slope[4] < gate_slope[3] < 1.0
    assert w[4] < 0.5                                                  # far off-policy: strongly damped
    x = 3.0 * (2.0 - 1)                                                # hand: rho 4 sig(x)(1 - sig(x))
    sig = 1 / (1 + math.exp(-x))
    assert math.isclose(w[4].item(), 2.0 * 4 * sig * (1 - sig), rel_tol=1e-12)
    neg = sapo(ratios.log(), torch.zeros_like(ratios), torch.tensor([-1.0], dtype=F64), torch.ones_like(ratios),
               tau_pos=3.0, tau_neg=0.5)
    torch.testing.assert_close(neg.loss[0, 2], torch.tensor(2 / 0.5, dtype=F64))  # -A (4/tau) sig(0)


@pytest.mark.parametrize("fn, kw", [(pg, {}), (sapo, {}), (sapo, {"tau_pos": 2.0, "tau_neg": 4.0}),
                                    (ppo_clip, {}), (ppo_clip, {"dual_clip_c": 3.0})])
def test_gradcheck_smooth_losses(fn, kw):
    g = torch.Generator().manual_seed(11)
    old = -torch.rand(3, 4, generator=g, dtype=F64)
    # ratios either well inside (0.95..1.05) or well outside (x1.6 / x0.5) the clip range: no kinks
    shift = torch.tensor([[0.03, -0.04, 0.47, -0.69]] * 3, dtype=F64)
    logp = (old + shift).requires_grad_(True)
    A = torch.tensor([1.0, -1.0, 0.5], dtype=F64)
    mask = torch.ones(3, 4, dtype=F64)
    assert torch.autograd.gradcheck(lambda lp: fn(lp, old, A, mask, **kw).loss, (logp,))


# --- DPPO -----------------------------------------------------------------------------------------

GRID_P = [0.05, 0.3, 0.5, 0.7, 0.95]


def _grid():
    rows = [(p, mu, a) for p in GRID_P for mu in GRID_P for a in (1.0, -1.0, 0.0)]
    p = torch.tensor([[r[0] for r in rows]], dtype=F64)
    mu = torch.tensor([[r[1] for r in rows]], dtype=F64)
    A = torch.tensor([[r[2] for r in rows]], dtype=F64)
    return rows, p, mu, A


def test_dppo_tv_masks_exactly_outside_trust_region_in_adv_direction():
    rows, p, mu, A = _grid()
    out = dppo_tv(p.log(), mu.log(), A, torch.ones_like(p), dppo_delta=0.15, dppo_cap=1e4)
    for j, (pj, muj, a) in enumerate(rows):
        outside = (pj - muj > 0.15) if a > 0 else (pj - muj < -0.15)
        assert bool(out.weight[0, j] == 0) == (outside or a == 0), (pj, muj, a)
        assert out.clipped_high[0, j].item() == (outside and a > 0)
        assert out.clipped_low[0, j].item() == (outside and a < 0)
        if not outside:
            assert math.isclose(out.weight[0, j].item(), a * pj / muj, rel_tol=1e-12)


def test_dppo_kl_masks_exactly_outside_trust_region_in_adv_direction():
    rows, p, mu, A = _grid()
    out = dppo_kl(p.log(), mu.log(), A, torch.ones_like(p), dppo_delta=0.05)
    for j, (pj, muj, a) in enumerate(rows):
        kl = muj * math.log(muj / pj) + (1 - muj) * math.log((1 - muj) / (1 - pj))
        outside = kl > 0.05 and ((pj > muj) if a > 0 else (pj < muj))
        assert out.clipped_high[0, j].item() == (outside and a > 0), (pj, muj, a)
        assert out.clipped_low[0, j].item() == (outside and a < 0), (pj, muj, a)


def test_dppo_cap_truncates_the_is_weight():
    p, mu = torch.tensor([[0.10]], dtype=F64), torch.tensor([[0.01]], dtype=F64)  # rho = 10, p - mu < delta
    out = dppo_tv(p.log(), mu.log(), torch.tensor([1.0], dtype=F64), torch.ones(1, 1, dtype=F64), dppo_cap=3.0)
    assert out.weight.item() == 3.0 and not out.clipped_high.any()


def test_bernoulli_kl_by_hand_and_extremes():
    mu, p = torch.tensor([0.5, 0.9, 1e-9, 0.999999]), torch.tensor([0.7, 0.9, 1e-9, 0.5])
    kl = bernoulli_kl(mu.log(), p.log())
    assert math.isclose(kl[0].item(), 0.5 * math.log(0.5 / 0.7) + 0.5 * math.log(0.5 / 0.3), rel_tol=1e-5)
    assert abs(kl[1].item()) < 1e-6 and abs(kl[2].item()) < 1e-6
    assert torch.isfinite(kl).all() and kl[3] > 0.6


def test_topk_divergence_full_vocab_is_exact_and_k1_is_binary():
    g = torch.Generator().manual_seed(3)
    pi, mu = torch.randn(6, 5, generator=g, dtype=F64).softmax(-1), torch.randn(6, 5, generator=g, dtype=F64).softmax(-1)
    tv, kl = topk_divergence(pi.log(), mu.log())                       # K = V: rest bucket is empty
    torch.testing.assert_close(tv, (pi - mu).abs().sum(-1) / 2)
    torch.testing.assert_close(kl, (mu * (mu.log() - pi.log())).sum(-1), atol=1e-9, rtol=0)
    tv1, kl1 = topk_divergence(pi[:, :1].log(), mu[:, :1].log())        # K = 1: {token, rest}
    torch.testing.assert_close(tv1, (pi[:, 0] - mu[:, 0]).abs())
    torch.testing.assert_close(kl1, bernoulli_kl(mu[:, 0].log(), pi[:, 0].log()))


def test_dppo_topk_needs_its_extra_inputs():
    b = _batch()
    for name in ("dppo_topk_tv", "dppo_topk_kl"):
        assert extra_inputs(POLICY_LOSSES[name]) == ("topk_logp", "old_topk_logp")
        assert extra_inputs(bind(POLICY_LOSSES[name], Recipe())) == ("topk_logp", "old_topk_logp")
        with pytest.raises(ValueError, match="topk_logp"):
            POLICY_LOSSES[name](b["logp"], b["old_logp"], b["adv"], b["mask"])
    assert extra_inputs(POLICY_LOSSES["ppo_clip"]) == ()


# --- input checks and robustness -------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(POLICY_LOSSES))
def test_bad_shapes_raise_value_error(name):
    fn = POLICY_LOSSES[name]
    with pytest.raises(ValueError, match="old_logp"):
        fn(torch.zeros(2, 3), torch.zeros(2, 4), torch.zeros(2), torch.ones(2, 3))
    with pytest.raises(ValueError, match="adv"):
        fn(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(3), torch.ones(2, 3))


def test_per_token_advantages_match_broadcast():
    b = _batch(8)
    for name in sorted(POLICY_LOSSES):
        fn = POLICY_LOSSES[name]
        tok = dict(b, adv=b["adv"][:, None].expand_as(b["logp"]).clone())
        torch.testing.assert_close(_call(fn, b).loss, _call(fn, tok).loss)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.1, 4.0), st.sampled_from(sorted(POLICY_LOSSES)))
def test_finite_outputs_for_finite_inputs(seed, spread, name):
    b = _batch(seed, spread=spread)
    out = _call(POLICY_LOSSES[name], b)
    for t in (out.loss, out.ratio, out.weight):
        assert torch.isfinite(t).all()
