"""Explorers without a kernel: set a control programmatically, read the figure, compare with values
computed by hand from the papers' formulas."""

import base64
import html
import json
import math
import re

import ipywidgets as widgets
import numpy as np
import plotly.io as pio
import pytest
import torch

from rlnb import Batch, Recipe, UpdateStats
from rlnb.algos import POLICY_LOSSES, LossOut
from rlnb.viz import (
    AdvantageExplorer,
    AggregationExplorer,
    ClipExplorer,
    KLExplorer,
    set_theme,
)
from rlnb.viz.explorers.demo import demo_record
from rlnb.viz.figures.zoo import trace

pytestmark = pytest.mark.usefixtures("backend")  # tests/conftest.py: the widget backend unless parametrized


BOTH = pytest.mark.parametrize("backend", ["widget", "static"], indirect=True)  # the rest: widget only


def y(explorer, name):
    return np.array(trace(explorer.fig, name).y, dtype=float)


def decode(v):
    """A plotly JSON array: a list, or a base64 typed array {"dtype", "bdata"}."""
    if isinstance(v, dict):
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=v["dtype"])
    return np.asarray(v, dtype=float)


def at(explorer, name, x0):
    t = trace(explorer.fig, name)
    return float(np.array(t.y, dtype=float)[np.argmin(np.abs(np.array(t.x) - x0))])


@BOTH
def test_backend_decides_the_view_and_the_view_shows_the_figure(backend):
    """The widget backend shows a PlotView, the static one an Output; each holds the figure as ``.fig`` is after
    the change (a change inside the redraw interval is sent when it is up, or at once on ``flush()``)."""
    from rlnb.viz.plotview import PlotView

    e = KLExplorer()
    assert isinstance(e.live.view, PlotView) == (backend == "widget")
    assert isinstance(e.live.view, widgets.Output) == (backend == "static")
    n = e.live.version
    e.controls["beta"].value = 0.5
    e.live.flush()
    assert e.live.version == n + 1 and not e.live.pending
    if backend == "static":  # the Output holds the figure's JSON
        shown = e.live.view.outputs[0]["data"]["application/vnd.plotly.v1+json"]
    else:
        shown = json.loads(e.live.view.figure)
        assert e.live.view.version == e.live.version
    grad = next(t for t in shown["data"] if t.get("meta") == "beta grad k1")
    assert np.allclose(decode(grad["y"]), -0.5)                  # d k1 / d logp = 1


# --- advantages --------------------------------------------------------------------------------------

def test_advantage_explorer_worked_example_for_each_estimator():
    """rewards [1, 0, 0, 0] (algorithms.md): GRPO [1.5, -.5, ...], Dr. GRPO [.75, -.25, ...],
    RLOO [1, -1/3, ...], MaxRL [3, -1, ...], REINFORCE = r."""
    e = AdvantageExplorer()
    expected = {"grpo": [1.5, -0.5, -0.5, -0.5], "dr_grpo": [0.75, -0.25, -0.25, -0.25],
                "rloo": [1, -1 / 3, -1 / 3, -1 / 3], "maxrl": [3, -1, -1, -1], "reinforce": [1, 0, 0, 0]}
    for name, adv in expected.items():
        e.controls["estimator"].value = name
        assert np.allclose(y(e, "advantage"), adv, atol=1e-4), name
        assert e.values["A_0"] == pytest.approx(adv[0], abs=1e-4)


def test_advantage_explorer_offers_the_estimators_that_need_only_rewards():
    from rlnb.algos import ADVANTAGES, extra_inputs

    e = AdvantageExplorer()
    offered = list(e.controls["estimator"].options)
    assert offered == sorted(n for n in ADVANTAGES if not extra_inputs(ADVANTAGES[n]))
    assert "grpo_passk" in offered and "remax" not in offered and "opo" not in offered
    e.controls["estimator"].value = "grpo_passk"                       # k = G: only the best one, r_max - r_2nd
    assert np.allclose(y(e, "advantage"), [1 / 0.5, 0, 0, 0], atol=1e-4)  # / the group's std 0.5
    with pytest.raises(ValueError, match="^estimator: expected one of"):
        AdvantageExplorer(estimator="remax")


def test_advantage_explorer_G_resizes_rewards_and_shared_noise_cancels():
    e = AdvantageExplorer(estimator="rloo")
    e.controls["G"].value = 6
    assert e.controls["rewards"].value == "1, 0, 0, 0, 0, 0"
    assert np.allclose(y(e, "advantage"), [1] + [-1 / 5] * 5)       # leave-one-out mean of the others
    e.controls["rewards"].value = "1, 1, 0"
    assert e.controls["G"].value == 3
    before = y(e, "advantage")
    e.controls["sigma_shared"].value = 0.7                             # the same shift for the whole group
    assert np.allclose(y(e, "advantage"), before) and not np.allclose(y(e, "reward"), [1, 1, 0])
    e.controls["sigma_sample"].value = 0.3                             # each completion's own noise stays
    assert not np.allclose(y(e, "advantage"), before)


def test_advantage_explorer_odd_one_out_std_inflation():
    """Group [1, 1, 1, 1 - g]: GRPO gives the odd one |A| = (3g/4) / (g/2) = 1.5 whatever g (the std
    shrinks with the gap); Dr. GRPO gives 3g/4."""
    e = AdvantageExplorer()
    gaps = np.array(trace(e.fig, "odd grpo").x, dtype=float)
    assert np.allclose(y(e, "odd grpo"), 1.5, rtol=3e-3)
    assert np.allclose(y(e, "odd dr_grpo"), 0.75 * gaps)
    e.controls["compare"].value = (*e.controls["compare"].value, "batch_norm")   # drawn once asked for
    assert np.allclose(y(e, "odd batch_norm"), 1.5, rtol=3e-3)         # a batch of one group: its own std
    assert trace(e.fig, "odd grpo").line.width == 3


def test_advantage_explorer_distribution_and_errors():
    e = AdvantageExplorer(p=1.0)
    assert len(trace(e.fig, "A wrong").x) == 0                          # p = 1: every sample right
    assert np.allclose(np.array(trace(e.fig, "A right").x, dtype=float), 0)  # all-equal groups: A = 0
    e.controls["sigma_sample"].value = 0.5
    e.controls["estimator"].value = "maxrl"                            # negative noisy rewards: MaxRL refuses
    assert e.error is not None and "rewards" in e.error and "MaxRL" in e.readout.value
    e.controls["sigma_sample"].value = 0.0
    assert e.error is None


def test_advantage_explorer_from_a_batch_group():
    b = demo_record().batch
    e = AdvantageExplorer(batch=b, group=1)
    assert e.controls["G"].value == 4 and e.controls["rewards"].value == "1, 1, 0, 0"
    with pytest.raises(ValueError, match="group: expected 0 <= group < P=2"):
        AdvantageExplorer(batch=b, group=2)


def test_estimator_hyperparameters_follow_the_dropdown():
    e = AdvantageExplorer()
    assert e.controls["eps"].layout.display != "none" and e.controls["batch_std_centred"].layout.display == "none"
    e.controls["estimator"].value = "rloo"
    assert all(e.controls[n].layout.display == "none" for n in ("eps", "unbiased", "batch_std_centred"))
    e.controls["estimator"].value = "grpo"
    e.controls["unbiased"].value = False                              # population std: sqrt(3)/4
    assert y(e, "advantage")[0] == pytest.approx(0.75 / (math.sqrt(3) / 4), rel=1e-4)


# --- clipping ----------------------------------------------------------------------------------------

@BOTH
def test_clip_explorer_ppo_curves_match_the_paper(backend):
    """A > 0: objective min(rho, 1 + eps_high); A < 0: -max(rho, 1 - eps_low) (PPO, 1707.06347)."""
    e = ClipExplorer()
    e.controls["eps_high"].value = 0.28
    rho = np.array(e.fig.data[0].x, dtype=float)
    assert np.allclose(y(e, "objective A>0"), np.minimum(rho, 1.28))
    assert np.allclose(y(e, "objective A<0"), -np.maximum(rho, 0.8))
    assert at(e, "objective A>0", 1.5) == pytest.approx(1.28)
    off = (np.abs(rho - 1.28) > 1e-6) & (np.abs(rho - 0.8) > 1e-6)     # exactly on a bound: either is right
    assert np.allclose(y(e, "weight A>0")[off], np.where(rho > 1.28, 0, rho)[off])   # clipped: no gradient
    assert np.allclose(y(e, "weight A<0")[off], np.where(rho < 0.8, 0, -rho)[off])
    e.controls["A"].value = 2.0
    assert at(e, "objective A>0", 0.5) == pytest.approx(1.0)
    e.controls["dual_clip_c_on"].value = True                           # c = 3: A<0 loss capped at -A c
    assert e.controls["dual_clip_c"].value == 3.0
    assert at(e, "objective A<0", 3.0) == pytest.approx(-6.0) and at(e, "weight A<0", 3.0) == 0
    assert "dual_clip_c=3" in e.fig.layout.title.text


def test_clip_explorer_cispo_keeps_the_gradient():
    e = ClipExplorer(loss="ppo_clip")
    e.controls["loss"].value = "cispo"
    assert (e.controls["eps_low"].value, e.controls["eps_high"].value) == (1.0, 0.28)  # cispo's own defaults
    assert e.controls["dual_clip_c"].layout.display == "none" and e.controls["cispo_cap_on"].layout.display != "none"
    assert at(e, "weight A>0", 1.5) == pytest.approx(1.28)             # truncated IS weight, still a gradient
    e.controls["loss"].value = "gspo"                                  # eps 3e-4 / 4e-4: a finer slider
    assert e.controls["eps_low"].step <= 1e-4 and e.controls["eps_low"].value == 3e-4
    e.controls["loss"].value = "dppo_tv"
    assert e.controls["dppo_cap"].step == 0.5                          # its usual step for 10.0
    e.controls["loss"].value = "cispo"
    assert e.controls["eps_high"].step == 0.01
    e.controls["cispo_cap_on"].value = True
    e.controls["cispo_cap"].value = 5.0
    assert at(e, "weight A>0", 1.5) == pytest.approx(1.5)


def _tiny_batch(ratio):
    """One group of two rows (A = +1, -1) with three tokens each, the given ratios."""
    B, T = 2, 3
    b = Batch.from_rows({"prompt": ["1+1="], "answer": ["2"]}, 2).replace(
        completion_ids=torch.zeros(B, T, dtype=torch.long), mask=torch.ones(B, T),
        old_logp=torch.full((B, T), math.log(0.3)), adv=torch.tensor([1.0, -1.0]))
    return b, UpdateStats(ratio=torch.tensor(ratio))


def test_clip_explorer_counts_the_batch_tokens_it_clips():
    batch, stats = _tiny_batch([[1.5, 1.0, 1.1], [0.5, 0.9, 1.0]])
    e = ClipExplorer(batch=batch, stats=stats)
    e.live.min_interval = 3600.0                                        # every change below waits for flush()
    assert (e.values["clip_ratio/low_mean"], e.values["clip_ratio/high_mean"], e.values["tokens"]) == (1 / 6, 1 / 6, 6)
    e.controls["eps_high"].value = 0.05                                 # 1.5 and 1.1 now above 1.05
    assert e.values["clip_ratio/high_mean"] == pytest.approx(2 / 6)
    e.controls["eps_low"].value = 0.05                                  # 0.5 and 0.9 below 0.95
    assert e.values["clip_ratio/low_mean"] == pytest.approx(2 / 6)
    # the readout: labels and 3 digits for the learner, the exact numbers by key for tests and tools. It travels
    # with the figure, which waits for the redraw interval: flush() sends both now
    assert "clipped low (share of tokens) = 0.333" not in e.readout.value and e.live.pending
    e.live.flush()
    assert "clipped low (share of tokens) = 0.333" in e.readout.value and "clip_ratio" not in e.readout.value.split(">")[1]
    exact = json.loads(html.unescape(re.search(r"data-rlnb-values='([^']*)'", e.readout.value)[1]))
    assert exact["clip_ratio/low_mean"] == pytest.approx(2 / 6) and exact["tokens"] == 6
    from rlnb.viz.explorers.base import _label
    assert (_label("reward"), _label("A_0")) == ("reward", "A_0")   # plain readout words keep their meaning
    assert np.allclose(sorted(trace(e.fig, "clipped A>0").x), [1.1, 1.5])


def test_clip_explorer_lists_losses_by_signature_and_shows_new_hyperparameters():
    @POLICY_LOSSES.register("_test_scaled")
    def scaled(logp, old_logp, adv, mask, *, zeta: float = 0.5):
        ratio = torch.exp(logp - old_logp)
        A = adv[:, None].expand_as(logp)
        none = torch.zeros_like(mask, dtype=torch.bool)
        return LossOut(-zeta * A * ratio * mask, ratio.detach(), none, none, (zeta * A * ratio).detach())

    @POLICY_LOSSES.register("_test_needs_tensor")
    def needs(logp, old_logp, adv, mask, extra):
        raise AssertionError("never called")

    try:
        e = ClipExplorer(loss="_test_scaled")
        options = e.controls["loss"].options
        assert "_test_needs_tensor" not in options and "dppo_topk_tv" not in options and "ppo_clip" in options
        e.controls["zeta"].value = 0.25
        rho = np.array(e.fig.data[0].x, dtype=float)
        assert np.allclose(y(e, "objective A>0"), 0.25 * rho)
    finally:
        del POLICY_LOSSES["_test_scaled"], POLICY_LOSSES["_test_needs_tensor"]


@BOTH
def test_explorers_do_not_share_or_stack_callbacks(backend):
    a, b = ClipExplorer(), ClipExplorer()
    assert a.controls["eps_high"] is not b.controls["eps_high"]
    n_a, n_b = a.n_updates, b.n_updates
    b.controls["eps_high"].value = 0.3
    assert (a.n_updates, b.n_updates) == (n_a, n_b + 1)
    b.controls["loss"].value = "cispo"                                  # resets several sliders, one redraw
    assert b.n_updates == n_b + 2
    for e in (a, b):
        assert len(e.controls["eps_high"]._trait_notifiers["value"]["change"]) == 1


@BOTH
def test_set_theme_rethemes_live_explorers(backend):
    e = AggregationExplorer()
    dark_bg = pio.templates["plotly_dark"].layout.paper_bgcolor
    try:
        set_theme("dark")
        assert e.fig.layout.template.layout.paper_bgcolor == dark_bg
        e.controls["G"].value = 4                                       # updates keep the theme
        assert e.fig.layout.template.layout.paper_bgcolor == dark_bg
    finally:
        set_theme("light")
    assert e.fig.layout.template.layout.paper_bgcolor != dark_bg


def test_widget_box_has_title_controls_readout_and_figure(backend):
    e = ClipExplorer()
    box = e.widget
    assert box is e.widget                                              # built once
    head, controls, readout, view = box.children
    assert "Clip explorer" in head.value and readout is e.readout and view is e.live.view
    assert {w.description for w in controls.children} >= {"loss", "eps_low", "eps_high", "A", "mu"}
    assert e.controls["eps_high"].tooltip == "ε_high: " + Recipe.knobs()["eps_high"].doc  # the declaration
    assert "application/vnd.jupyter.widget-view+json" in e._repr_mimebundle_()


def untitled_axes(fig) -> list[str]:
    """The axes a reader sees (tick labels shown) that have no title, as the browser test reads them."""
    layout = fig.layout.to_plotly_json()
    return sorted(k for k, ax in layout.items() if k.startswith(("xaxis", "yaxis")) and ax.get("showticklabels", True)
                  and not (ax.get("title") or {}).get("text"))


@pytest.mark.parametrize("cls", [ClipExplorer, AdvantageExplorer, KLExplorer, AggregationExplorer])
def test_every_explorer_axis_has_a_title(cls):
    assert untitled_axes(cls().fig) == []
