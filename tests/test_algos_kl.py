"""KL estimators: signs, unbiasedness vs exact KL on known categoricals, straight-through k3+, controller."""

import math

import pytest
import torch

from rlnb.algos import KL_ESTIMATORS, AdaptiveKLController, kl_penalized_rewards
from rlnb.algos.kl import abs_kl, k1, k2, k3, k3_plus

F64 = torch.float64
P = torch.tensor([0.4, 0.3, 0.15, 0.1, 0.05], dtype=F64)   # pi (samples are drawn from it)
Q = torch.tensor([0.1, 0.2, 0.2, 0.2, 0.3], dtype=F64)     # pi_ref
EXACT_KL = float((P * (P.log() - Q.log())).sum())           # KL(pi || pi_ref) by enumeration


def test_registry_names():
    assert sorted(KL_ESTIMATORS) == ["abs", "abs+", "k1", "k1+", "k2", "k3", "k3+"]


@pytest.mark.parametrize("name", ["abs", "abs+", "k2", "k3", "k3+"])
def test_nonnegative_estimators(name):
    d = torch.linspace(-20, 20, 4001, dtype=F64)
    assert torch.all(KL_ESTIMATORS[name](d, torch.zeros_like(d)) >= 0)


def test_k1_takes_negative_values():
    assert k1(torch.tensor([-1.0]), torch.tensor([0.0])).item() == -1.0


def _samples(n=200_000):
    g = torch.Generator().manual_seed(1234)
    x = torch.multinomial(P, n, replacement=True, generator=g)
    return P.log()[x], Q.log()[x]


@pytest.mark.parametrize("name", ["k1", "k1+", "k3"])
def test_unbiased_estimators_match_exact_kl(name):
    logp, ref = _samples()
    est = KL_ESTIMATORS[name](logp, ref)
    se = est.std().item() / math.sqrt(est.numel())
    assert abs(est.mean().item() - EXACT_KL) < 5 * se, (est.mean().item(), EXACT_KL, se)


def test_k3_has_lower_variance_than_k1_here():
    logp, ref = _samples()
    assert k3(logp, ref).var() < k1(logp, ref).var()


def test_k2_is_biased():
    """E_pi[k2] computed by enumeration differs from KL; the sample mean agrees with E_pi[k2], not with KL."""
    exact_k2 = float((P * (P.log() - Q.log()) ** 2 / 2).sum())
    logp, ref = _samples()
    est = k2(logp, ref)
    se = est.std().item() / math.sqrt(est.numel())
    assert abs(est.mean().item() - exact_k2) < 5 * se
    assert abs(exact_k2 - EXACT_KL) > 20 * se                           # 0.045 vs se 0.001


def test_k3_plus_value_is_k3_gradient_is_k2():
    d = torch.tensor([-2.0, -0.3, 0.0, 0.7, 3.0], dtype=F64)
    a, b = d.clone().requires_grad_(True), d.clone().requires_grad_(True)
    v = k3_plus(a, torch.zeros_like(d))
    v.sum().backward()
    k2(b, torch.zeros_like(d)).sum().backward()
    torch.testing.assert_close(v.detach(), k3(d, torch.zeros_like(d)))
    torch.testing.assert_close(a.grad, b.grad)
    torch.testing.assert_close(a.grad, d)                               # d k2 / d logp = d


def test_k3_gradient_targets_the_reverse_kl():
    """Mean of k3's gradient coefficient (1 - ref/pi) under pi is 1 - sum(ref) = 0 per token: exact check
    of E_pi[(1 - q/p) grad log p] = -sum_x q(x) grad log p(x), i.e. the gradient of KL(ref || pi)."""
    coef = 1 - Q / P                                                   # d k3 / d logp at each category
    torch.testing.assert_close((P * coef).sum(), torch.tensor(0.0, dtype=F64), atol=1e-12, rtol=0)


def test_abs_is_biased_upward_and_pulls_with_constant_strength():
    """E_pi|d| by enumeration exceeds KL (= |E_pi d|); the sample mean agrees with E_pi|d|, not with KL."""
    exact_abs = float((P * (P.log() - Q.log()).abs()).sum())             # 0.878 vs KL 0.474
    assert exact_abs > EXACT_KL + 0.1
    logp, ref = _samples()
    est = abs_kl(logp, ref)
    assert abs(est.mean().item() - exact_abs) < 5 * est.std().item() / math.sqrt(est.numel())
    d = torch.tensor([-3.0, -0.5, 0.5, 3.0], dtype=F64, requires_grad=True)
    abs_kl(d, torch.zeros_like(d)).sum().backward()
    assert d.grad.tolist() == [-1.0, -1.0, 1.0, 1.0]                   # sign(d): the same pull at any distance


@pytest.mark.parametrize("fn", [k1, k2, k3, abs_kl])
def test_gradcheck(fn):
    logp = torch.randn(3, 4, dtype=F64, requires_grad=True)
    ref = torch.randn(3, 4, dtype=F64)
    assert torch.autograd.gradcheck(lambda x: fn(x, ref), (logp,))


def test_kl_penalized_rewards_by_hand():
    rewards = torch.tensor([1.0, 0.0])
    logp = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, -0.5, -0.5]], requires_grad=True)
    ref = torch.tensor([[-1.5, -1.0, -9.0], [-0.5, -1.5, -0.5]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    out = kl_penalized_rewards(rewards, logp, ref, mask, kl_coef=0.5)
    # row 0: k1 = 0.5 - 1.0 (third token masked) = -0.5 -> 1 + 0.25; row 1: k1 sum = 1.0 -> -0.5
    torch.testing.assert_close(out, torch.tensor([1.25, -0.5]))
    assert not out.requires_grad


def test_adaptive_kl_controller_moves_toward_target_and_is_bounded():
    c = AdaptiveKLController(target=6.0, horizon=100, beta=1.0)
    assert c.update(observed_kl=6.6, n_steps=10) == pytest.approx(1.0 * (1 + 0.1 * 10 / 100))
    c = AdaptiveKLController(target=6.0, horizon=100, beta=1.0)
    assert c.update(observed_kl=600.0, n_steps=10) == pytest.approx(1.02)  # error clipped to +0.2
    c = AdaptiveKLController(target=6.0, horizon=100, beta=1.0)
    assert c.update(observed_kl=0.0, n_steps=10) == pytest.approx(0.98)    # error clipped to -0.2
    c = AdaptiveKLController(target=6.0, horizon=100, beta=1.0)
    assert c.update(observed_kl=6.0, n_steps=10) == 1.0


def test_adaptive_kl_controller_rejects_bad_settings():
    with pytest.raises(ValueError, match="target"):
        AdaptiveKLController(target=0.0, horizon=10)


def test_kl_regularised_optimum_is_the_tilted_reference_and_maximises_the_objective():
    import math

    import torch as _t

    from rlnb.algos import kl_regularised_optimum

    ref, r = _t.tensor([0.02, 0.03, 0.95], dtype=_t.float64), _t.tensor([1.0, 1.0, 0.0], dtype=_t.float64)
    pi = kl_regularised_optimum(ref, r, beta=0.5)
    z = 0.05 * math.e ** 2 + 0.95                                   # by hand: Z = sum ref e^{r / beta}
    assert abs(float(pi[0]) - 0.02 * math.e ** 2 / z) < 1e-12
    assert float((pi / ref).max()) <= math.e ** 2 + 1e-12            # the tilt bound e^{(r_max - r_min)/beta}
    obj = lambda p: float((p * r).sum() - 0.5 * (p * (p / ref).log()).sum())  # noqa: E731
    for q in (_t.tensor([0.1, 0.1, 0.8]), _t.tensor([0.05, 0.2, 0.75]), ref):  # any other policy scores lower
        assert obj(pi) > obj(q.double())
    assert _t.allclose(kl_regularised_optimum(ref, r, beta=0.0), _t.tensor([0.4, 0.6, 0.0], dtype=_t.float64))
    with pytest.raises(ValueError, match="beta"):
        kl_regularised_optimum(ref, r, beta=-1.0)


def test_k3_loss_optimum_by_hand_and_stationary():
    import torch as _t

    from rlnb.algos import k3_loss_optimum

    pi = k3_loss_optimum(_t.tensor([0.5, 0.5]), _t.tensor([1.0, 0.0]), beta=1.0)
    # by hand: 0.5/(l - 1) + 0.5/l = 1 -> l^2 - 2l + 0.5 = 0 -> l = 1 + 1/sqrt(2), pi(1) = 0.5/(l - 1) = 1/sqrt(2)
    assert abs(float(pi[0]) - 2 ** -0.5) < 1e-12 and abs(float(pi.sum()) - 1) < 1e-12
    ref, r = _t.tensor([0.02, 0.03, 0.95], dtype=_t.float64), _t.tensor([1.0, 1.0, 0.0], dtype=_t.float64)
    pi = k3_loss_optimum(ref, r, beta=0.5)
    lam = r + 0.5 * ref / pi                                           # r + beta pi_ref / pi: one value at the optimum
    assert float(lam.max() - lam.min()) < 1e-9
    obj = lambda p: float((p * r).sum() - 0.5 * (ref * (ref / p).log()).sum())  # noqa: E731  E[r] - beta KL(ref || pi)
    for q in (_t.tensor([0.1, 0.1, 0.8]), _t.tensor([0.3, 0.4, 0.3]), ref):
        assert obj(pi) > obj(q.double())


def test_k3_in_the_loss_has_the_gradient_of_kl_ref_to_pi_on_one_token():
    import torch as _t

    from rlnb.algos.kl import k3

    logits = _t.tensor([0.3, -1.0, 0.5, 2.0], dtype=_t.float64, requires_grad=True)
    ref = _t.tensor([0.1, 0.2, 0.3, 0.4], dtype=_t.float64)
    logp = logits.log_softmax(0)
    expected_k3 = (logp.exp().detach() * k3(logp, ref.log())).sum()   # E_{y ~ pi}[k3], sampling not differentiated
    g_k3, = _t.autograd.grad(expected_k3, logits, retain_graph=True)
    g_fwd, = _t.autograd.grad((ref * (ref.log() - logp)).sum(), logits)   # grad KL(pi_ref || pi)
    assert _t.allclose(g_k3, g_fwd, atol=1e-12)


def test_the_sequence_kl_tilt_bound_does_not_hold_for_the_k3_objective():
    import math

    import torch as _t

    from rlnb.algos import k3_loss_optimum, kl_regularised_optimum

    ref, r = _t.tensor([0.005, 0.005, 0.99], dtype=_t.float64), _t.tensor([1.0, 1.0, 0.0], dtype=_t.float64)
    seq, tok = kl_regularised_optimum(ref, r, beta=0.5), k3_loss_optimum(ref, r, beta=0.5)
    assert float((seq / ref).max()) <= math.e ** 2 + 1e-12            # the bound, for the objective it belongs to
    assert float((tok / ref).max()) > 5 * math.e ** 2                 # beta < dr: no cap; about (1 - beta)/q = 50
    assert abs(float(tok[0] / ref[0]) - 0.5 / 0.01) < 2
    for q in (0.5, 0.1, 0.01, 1e-4):                                   # beta = 2 > dr = 1: capped by beta/(beta - dr)
        ref = _t.tensor([q, 1 - q], dtype=_t.float64)
        tilt = float(k3_loss_optimum(ref, _t.tensor([1.0, 0.0]), beta=2.0)[0] / q)
        assert tilt <= 2 + 1e-9
    assert tilt > 1.99 and tilt > math.e ** 0.5                       # near the cap, past the sequence bound
    with pytest.raises(ValueError, match="beta"):
        k3_loss_optimum(ref, _t.tensor([1.0, 0.0]), beta=0.0)
