"""GAEExplorer without a kernel: move gamma and lambda programmatically and compare with GAE by hand."""

import numpy as np
import pytest
import torch

from rlnb.viz import GAEExplorer
from rlnb.viz.figures.zoo import trace

pytestmark = pytest.mark.usefixtures("backend")

MASK = torch.tensor([[1, 1, 1], [1, 1, 0]])
REWARDS = torch.tensor([1.0, 0.0])
VALUES = torch.tensor([[0.2, 0.4, 0.6], [0.3, 0.1, 0.0]])


def test_heat_strip_is_gae_by_hand_at_both_limits():
    e = GAEExplorer(values=VALUES, mask=MASK, rewards=REWARDS, lam=1.0)
    z = np.array(trace(e.fig, "advantages").z, dtype=float)
    # lambda = 1, gamma = 1: A_t = R - V_t; the padding cell is blank (NaN)
    assert np.allclose(z[0], [0.8, 0.6, 0.4]) and np.allclose(z[1, :2], [-0.3, -0.1]) and np.isnan(z[1, 2])
    e.controls["lam"].value = 0.0                                  # one-step TD: V_{t+1} - V_t (+ r at the end)
    z = np.array(trace(e.fig, "advantages").z, dtype=float)
    assert np.allclose(z[0], [0.2, 0.2, 0.4]) and np.allclose(z[1, :2], [-0.2, -0.1])
    assert e.values["A_0"] == pytest.approx(0.2)
    e.controls["gamma"].value = 0.9                                # discounting shrinks what comes from later
    assert e.values["A_0"] == pytest.approx(0.9 * 0.4 - 0.2)


def test_error_curve_against_a_target_and_marker_follow_lambda():
    target = torch.tensor([[0.8, 0.6, 0.4], [-0.3, -0.1, 0.0]])    # = the lambda = 1 advantages
    e = GAEExplorer(values=VALUES, mask=MASK, rewards=REWARDS, target=target, lam=1.0)
    err = np.array(trace(e.fig, "error (RMSE vs Monte Carlo)").y, dtype=float)
    assert err[-1] == pytest.approx(0.0, abs=1e-6) and err[0] > 0.1
    assert e.values["error"] == pytest.approx(0.0, abs=1e-6)
    e.controls["lam"].value = 0.5
    assert list(trace(e.fig, "this λ").x) == [0.5]
    assert e.values["error"] > 0


def test_no_target_draws_no_error_and_bad_input_is_named():
    e = GAEExplorer(values=VALUES, mask=MASK, rewards=REWARDS)
    assert len(trace(e.fig, "error (RMSE vs Monte Carlo)").x) == 0 and "error" not in e.values
    with pytest.raises(ValueError, match="values"):
        GAEExplorer(values=torch.zeros(2, 4), mask=MASK, rewards=REWARDS)
    with pytest.raises(ValueError, match="rows"):
        GAEExplorer(values=VALUES, mask=MASK, rewards=REWARDS, rows=[5])


def test_two_explorers_never_share_or_stack_callbacks():
    a = GAEExplorer(values=VALUES, mask=MASK, rewards=REWARDS)
    b = GAEExplorer(values=VALUES, mask=MASK, rewards=REWARDS)
    n_a, n_b = a.n_updates, b.n_updates
    b.controls["lam"].value = 0.3
    assert (a.n_updates, b.n_updates) == (n_a, n_b + 1)
    for e in (a, b):
        for w in e.controls.values():
            assert len(w._trait_notifiers["value"]["change"]) == 1
