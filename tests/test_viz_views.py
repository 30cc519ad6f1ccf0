"""KL, aggregation, entropy and token explorers without a kernel: set a control, read the figure,
compare with values computed by hand."""

import math

import numpy as np
import pytest

from rlnb import Recipe
from rlnb.viz import AggregationExplorer, EntropyView, KLExplorer, TokenXRay
from rlnb.viz.explorers.demo import demo_record
from rlnb.viz.figures.zoo import trace

pytestmark = pytest.mark.usefixtures("backend")  # tests/conftest.py: the widget backend unless parametrized


BOTH = pytest.mark.parametrize("backend", ["widget", "static"], indirect=True)


def y(explorer, name):
    return np.array(trace(explorer.fig, name).y, dtype=float)


def test_kl_explorer_exact_kl_and_gradient_weights():
    e = KLExplorer(beta=0.1, compare=("k1", "k2", "k3", "k3+"))          # k3+ drawn on request
    assert e.values["KL"] == pytest.approx(0.125)                       # (0.5 - 0)^2 / 2
    e.controls["pi_mean"].value, e.controls["pi_std"].value = 0.0, 2.0
    assert e.values["KL"] == pytest.approx(math.log(0.5) + 4 / 2 - 0.5)
    d = np.array(trace(e.fig, "beta grad k3").x, dtype=float)
    assert np.allclose(y(e, "beta grad k1"), -0.1)                      # d k1 / d logp = 1
    assert np.allclose(y(e, "beta grad k2"), -0.1 * d)
    assert np.allclose(y(e, "beta grad k3"), -0.1 * (1 - np.exp(-d)))
    assert np.allclose(y(e, "beta grad k3+"), -0.1 * d)                 # straight-through: k2's gradient
    e.controls["A"].value = 0.5
    assert list(trace(e.fig, "policy +A").y) == [0.5, 0.5]


def test_kl_explorer_bias_of_k2_and_unbiased_k1_k3():
    """pi = N(1, 1), ref = N(0, 1): d = x - 1/2 ~ N(1/2, 1), KL = 1/2, E[k2] = E[d^2]/2 = 5/8."""
    e = KLExplorer(pi=(1.0, 1.0), ref=(0.0, 1.0))
    n = e.n_samples
    for name in ("k1", "k3"):
        e.controls["estimator"].value = name
        assert abs(e.values["bias"]) < 4 * e.values["std"] / math.sqrt(n), name
    e.controls["estimator"].value = "k2"
    assert e.values["mean"] == pytest.approx(0.625, abs=4 * e.values["std"] / math.sqrt(n))
    assert e.values["bias"] > 0.05


def test_aggregation_explorer_length_bias_by_hand():
    """G = 8, two right completions of 6 tokens, six wrong of 24 (defaults)."""
    e = AggregationExplorer()
    assert e.values["weight right"] == pytest.approx(1 / (8 * 6))       # seq-mean-token-mean: 1/(G |o_i|)
    assert e.values["weight wrong"] == pytest.approx(1 / (8 * 24)) and e.values["wrong/right"] == pytest.approx(0.25)
    std = math.sqrt((2 * 0.75 ** 2 + 6 * 0.25 ** 2) / 7)                # GRPO's unbiased std of the rewards
    assert e.values["push right"] == pytest.approx(0.75 / std / 8, rel=1e-4)
    expected = {"token-mean": 1 / 156, "prompt-mean": 1 / 156, "seq-mean-token-sum": 1 / 8,
                "seq-mean-token-sum-norm": 1 / (8 * 32)}
    for name, w in expected.items():
        e.controls["aggregation"].value = name
        assert np.allclose(y(e, f"token weight {name}"), w), name
        assert e.values["wrong/right"] == pytest.approx(1.0)
    e.controls["max_new_tokens"].value = 10                             # < the 24-token completions
    assert "max_new_tokens" in e.error
    e.controls["max_new_tokens"].value = 24
    e.controls["len_right"].value = 3
    assert e.error is None and e.values["weight right"] == pytest.approx(1 / (8 * 24))


def test_aggregation_explorer_on_a_batch():
    b = demo_record().batch
    e = AggregationExplorer(batch=b, aggregation="token-mean")
    assert e.controls["G"].disabled
    assert np.allclose(y(e, "token weight token-mean"), 1 / float(b.mask.sum()))


def test_entropy_view_thermostat_replay_by_hand():
    hist = [{"step": 1, "entropy": 0.5}, {"step": 2, "entropy": 0.2}, {"step": 3, "entropy": 0.1}]
    e = EntropyView(history=hist, target=0.3)
    # alpha_k = c_k 1[e_k <= target]; c rises by delta = 1e-3 below the target, falls (floored at 0) above
    assert np.allclose(y(e, "thermostat coef"), [0, 0, 0.001]) and e.values["steps below target"] == 2
    e.controls["target"].value = 0.6
    assert np.allclose(y(e, "thermostat coef"), [0, 0.001, 0.002]) and list(trace(e.fig, "target").y) == [0.6, 0.6]
    # the Trainer's thermostat (gate=False): the coefficient applies above the target too, and the
    # recipe's entropy_target / entropy_coef_delta / entropy_coef_max set it up
    r = Recipe(entropy_target=0.3, entropy_coef_delta=0.01, entropy_coef_max=0.015)
    hist2 = [{"step": s, "entropy": h} for s, h in enumerate([0.2, 0.2, 0.5, 0.5], 1)]
    e2 = EntropyView(history=hist2, recipe=r)
    assert e2.controls["target"].value == 0.3
    assert np.allclose(y(e2, "thermostat coef"), [0, 0.01, 0.015, 0.005])  # c: .01, .015 (cap), .005, 0
    rec = demo_record()
    z = np.array(e.fig.data[0].z, dtype=float)
    m = rec.batch.mask.numpy() > 0
    assert np.allclose(z[m], rec.stats.token_entropy.numpy()[m]) and np.isnan(z[~m]).all()


@BOTH
def test_token_xray_colours_tokens_and_scrubs_steps(backend):
    a, b = demo_record(seed=0), demo_record(seed=1)
    b.metrics["step"] = 7
    x = TokenXRay(records=[a, b], group=1)
    assert x.values["step"] == 7                                        # default: the latest record
    rows = slice(4, 8)
    expected = (b.batch.adv[rows, None] * b.stats.ratio[rows]).numpy()
    m = b.batch.mask[rows].numpy() > 0
    z = np.array(x.fig.data[0].z, dtype=float)
    assert np.allclose(z[m], expected[m], atol=1e-6) and np.isnan(z[~m]).all()
    hi = (b.stats.clipped_high[rows] & b.batch.mask[rows].bool()).nonzero()
    assert sorted(zip(x.fig.data[2].y, x.fig.data[2].x, strict=True)) == sorted(map(tuple, hi.tolist()))
    assert list(x.fig.data[0].text[1][:5]) == list("1589") + ["∎"]                 # the cell: a mark
    assert list(x.fig.data[0].hovertext[1][:5]) == list("1589") + ["<eos>"]       # the hover: the token
    assert (x.controls["step"].min, x.controls["step"].max) == (a.metrics.get("step", 1), 7)   # trainer steps
    x.controls["step"].value = 6                                        # no record kept at 6: the one before it
    assert x.values["step"] == 1 and x.values["clipped high"] == int((a.stats.clipped_high[rows] & (a.batch.mask[rows] > 0)).sum())




def test_show_source_unwraps_a_triton_kernel(capsys):
    pytest.importorskip("triton", reason="Triton is not installed on this machine")
    from rlnb.kernels import token_loss
    from rlnb.viz import show_source

    src = show_source(token_loss._fwd_kernel)                    # a JITFunction (InterpretedFunction on CPU)
    assert src.lstrip().startswith("@triton.jit") and "tl.load" in src
