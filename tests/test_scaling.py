"""ScaleRL's sigmoidal curve: values by hand, parameters recovered from noisy synthetic points, bad input."""

import math

import pytest
import torch

from rlnb.studies import RunResult, StudyResult
from rlnb.studies.scaling import ScalingFit, fit_sigmoid, fit_study, sigmoid_curve


def test_curve_by_hand():
    # C = C_mid: half the gain; C = 3 C_mid with B = 1: 3/4 of it; C = 0: R0; C -> inf: A
    r = sigmoid_curve(torch.tensor([0.0, 10.0, 30.0, 1e12]), A=0.9, B=1.0, C_mid=10.0, R0=0.1)
    assert r.tolist() == pytest.approx([0.1, 0.5, 0.7, 0.9])
    # B = 2: (C_mid / C)^2 = 1/4 at C = 2 C_mid -> 0.1 + 0.8 * 4/5
    assert float(sigmoid_curve(torch.tensor(20.0), A=0.9, B=2.0, C_mid=10.0, R0=0.1)) == pytest.approx(0.74)
    fit = ScalingFit(A=0.9, B=2.0, C_mid=10.0, R0=0.1, mse=0.0, n=0)
    assert fit.compute_for(0.74) == pytest.approx(20.0) and fit.compute_for(0.95) == math.inf


def noisy_points(A, B, C_mid, R0, n=30, noise=0.01, seed=0):
    g = torch.Generator().manual_seed(seed)
    C = torch.logspace(1, 5, n, dtype=torch.float64)
    R = sigmoid_curve(C, A=A, B=B, C_mid=C_mid, R0=R0) + noise * torch.randn(n, generator=g, dtype=torch.float64)
    return C, R


@pytest.mark.parametrize("A,B,C_mid,R0", [(0.7, 1.5, 3000.0, 0.15), (0.45, 0.8, 500.0, 0.05), (0.95, 2.5, 20000.0, 0.3)])
def test_fit_recovers_known_parameters(A, B, C_mid, R0):
    C, R = noisy_points(A, B, C_mid, R0)
    # R0 fixed by a point at zero compute, as a study's step-0 evaluation does
    fit = fit_sigmoid(torch.cat([torch.zeros(1, dtype=torch.float64), C]), torch.cat([torch.tensor([R0]), R]))
    assert fit.R0 == pytest.approx(R0)
    assert fit.A == pytest.approx(A, abs=0.03)
    assert fit.B == pytest.approx(B, rel=0.2)
    assert math.log(fit.C_mid) == pytest.approx(math.log(C_mid), abs=0.25)
    assert fit.n == 30 and fit.mse < 2 * 0.01**2


def test_fit_with_free_r0_and_given_r0():
    C, R = noisy_points(0.7, 1.5, 3000.0, 0.15, noise=0.005)
    free = fit_sigmoid(C, R)
    assert free.R0 == pytest.approx(0.15, abs=0.03) and free.A == pytest.approx(0.7, abs=0.03)
    given = fit_sigmoid(C, R, r0=0.15)
    assert given.R0 == 0.15 and given.A == pytest.approx(0.7, abs=0.03)


def test_fit_is_bounded_by_upper():
    C, R = noisy_points(0.7, 1.5, 3000.0, 0.15)
    fit = fit_sigmoid(C, R, r0=0.15, upper=0.6)   # the data want 0.7; the bound holds
    assert 0.15 < fit.A <= 0.6 and fit.A_at_bound and fit.extrapolated
    good = fit_sigmoid(C, R, r0=0.15)                 # C from 10 to 1e5 around C_mid = 3000
    assert not good.A_at_bound and not good.extrapolated and good.C_max == pytest.approx(1e5)
    early = fit_sigmoid(C[:18], R[:18], r0=0.15)      # only up to C = 2200 < C_mid: the bend is not seen
    assert early.extrapolated


def test_fit_study_on_training_metrics_shifts_compute_by_one_step():
    # step t's reward was sampled before update t: its point is at the samples of steps < t
    hist = [{"samples": 10 * (i + 1), "reward": 0.1 + 0.01 * i} for i in range(6)]
    res = StudyResult([RunResult("a", 0, hist, [])], {"name": "t"})
    fit = fit_study(res, "reward")["a"]
    assert fit.R0 == pytest.approx(0.1) and fit.n == 5        # step 1 sits at C = 0 and fixes R0


def test_fit_rejects_bad_input():
    with pytest.raises(ValueError, match="compute, reward"):
        fit_sigmoid([1.0, 2.0, 3.0], [0.1, 0.2])
    with pytest.raises(ValueError, match="compute"):
        fit_sigmoid([-1.0, 2.0, 3.0, 4.0], [0.1, 0.2, 0.3, 0.4])
    with pytest.raises(ValueError, match="compute"):
        fit_sigmoid([0.0, 1.0, 2.0], [0.1, 0.2, 0.3])              # only 2 points past zero compute
    with pytest.raises(ValueError, match="reward"):
        fit_sigmoid([1.0, 2.0, 3.0], [0.1, float("nan"), 0.3])
    with pytest.raises(TypeError, match="compute"):
        fit_sigmoid("abc", [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="r0"):
        fit_sigmoid([1.0, 2.0, 3.0], [0.1, 0.2, 0.3], r0=1.5)


def test_fit_study_per_arm():
    C, R = noisy_points(0.6, 1.2, 2000.0, 0.2, n=12, noise=0.005)

    def run(arm, seed, scale):
        evals = [{"samples": 0, "greedy/pass@1": 0.2}]
        evals += [{"samples": float(c), "greedy/pass@1": 0.2 + scale * (float(r) - 0.2)} for c, r in zip(C, R)]
        return RunResult(arm, seed, [], evals)

    res = StudyResult([run("good", 0, 1.0), run("good", 1, 1.0), run("half", 0, 0.5)], {"name": "t"})
    fits = fit_study(res)
    assert fits["good"].A == pytest.approx(0.6, abs=0.03) and fits["good"].n == 24
    assert fits["half"].A == pytest.approx(0.4, abs=0.03)     # half the gain: R0 + (0.6 - 0.2) / 2
