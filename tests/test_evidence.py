"""The evidence chapters' building blocks: pass@k for every power of two below k from the same samples, mini-batches
when dynamic sampling refilled fewer groups than mini-batches, and the figure builders of rlnb.viz.figures.evidence."""

from types import SimpleNamespace

import pytest
import torch

import rlnb
from rlnb.run.evaluate import pass_at_k
from rlnb.studies import Stat
from rlnb.viz.figures import evidence


def test_evaluate_reports_pass_at_every_power_of_two_below_k():
    t = rlnb.Trainer.tiny("grpo", task="countdown", seed=0, prompts_per_step=4, num_generations=4)
    res = t.evaluate(6, greedy=False, k=8)
    assert set(res) == {"pass@1", "pass@2", "pass@4", "pass@8", "mean_length"}
    assert res["pass@1"] <= res["pass@2"] <= res["pass@4"] <= res["pass@8"]
    assert pass_at_k(8, 2, 4) == pytest.approx(1 - (6 * 5 * 4 * 3) / (8 * 7 * 6 * 5))


def test_mini_batches_never_outnumber_the_groups():
    t = rlnb.Trainer.tiny("grpo", task="add", seed=0, prompts_per_step=4, num_generations=2, num_mini_batches=4)
    two_groups = SimpleNamespace(P=2, group_size=2)                  # what a dynamic-sampling refill may bring
    parts = t.updater.mini_batches(two_groups)
    assert len(parts) == 2 and sorted(torch.cat(parts).tolist()) == [0, 1, 2, 3]
    assert len(t.updater.mini_batches(SimpleNamespace(P=4, group_size=2))) == 4


def test_diff_bars_error_bars_are_the_t_interval():
    st = Stat((0.1, 0.3, 0.2, 0.25, 0.15))
    fig = evidence.diff_bars({"a": st}, title="t", xaxis="x", yaxis="y")
    lo, hi = st.ci95()
    bar = fig.data[0]
    assert bar.y[0] == pytest.approx(st.mean)
    assert bar.error_y.array[0] == pytest.approx(hi - st.mean) and bar.error_y.arrayminus[0] == pytest.approx(st.mean - lo)


def test_chain_figure_rejects_an_unknown_stage():
    ok = evidence.chain_figure([{"stage": "Sampler", "change": "dynamic sampling", "symptom": "no signal"}], title="t")
    assert any("dynamic sampling" in a.text for a in ok.layout.annotations)
    with pytest.raises(ValueError, match="unknown stages"):
        evidence.chain_figure([{"stage": "Critic", "change": "x", "symptom": "y"}], title="t")


def test_race_grid_one_panel_per_arm_with_the_reference_behind():
    curves = {a: {"x": [0, 1, 2], "per_seed": {0: [0.1, 0.2, 0.3], 1: [0.1, 0.3, 0.4]}} for a in ("grpo", "dapo", "maxrl")}
    fig = evidence.race_grid(curves, reference="grpo", title="t", yaxis="y", cols=2)
    assert [a.text for a in fig.layout.annotations][:2] == ["dapo", "maxrl"]
    assert len(fig.data) == 2 * 2 * 2                                 # per panel: reference band + mean, arm band + mean


def test_passk_figure_error_bars_span_the_seeds():
    fig = evidence.passk_figure({"grpo": {1: [0.2, 0.4], 8: [0.6, 0.7]}}, title="t")
    tr = fig.data[0]
    assert list(tr.x) == [1, 8] and tr.y[0] == pytest.approx(0.3)
    assert tr.error_y.array[0] == pytest.approx(0.1) and tr.error_y.arrayminus[1] == pytest.approx(0.05)
