"""report.html: what ran, what changed, pass@1 before and after, titled and labelled curves, time per stage,
offline, light and dark."""

import re

from rlnb import recipes
from rlnb.cli.report import REPORT_PANELS, changed_settings, report_figure, write_report
from rlnb.viz.figures.theme import metric_label

HISTORY = [{"step": s, "reward": 0.1 * s, "accuracy": 0.05 * s, "entropy": 0.5, "kl": 0.0, "grad_norm": 1.5,
            "clip_ratio/low_mean": 0.0, "clip_ratio/high_mean": 0.01, "frac_reward_zero_std": 0.25,
            "completions/mean_length_correct": 6.0, "completions/mean_length_wrong": 9.0} for s in (1, 2, 3)]
SUMMARY = {"greedy_pass@1_before": 0.2, "greedy_pass@1_after": 0.35, "steps": 3, "seed": 0,
           "mean_time_per_stage_s": {"timing/sample_s": 0.3, "timing/update_s": 0.1}}


def test_every_panel_is_titled_and_labelled():
    fig = report_figure(HISTORY, "t")
    layout = fig.layout.to_plotly_json()
    axes = [k for k in layout if k.startswith(("xaxis", "yaxis"))]
    assert len(axes) == 2 * len(REPORT_PANELS)
    assert all(layout[k]["title"]["text"] for k in axes)
    assert [t.name for t in fig.data][:2] == [metric_label("reward"), metric_label("accuracy")]
    assert list(fig.data[0].y) == [0.1, 0.2, 0.30000000000000004]


def test_settings_that_differ_from_the_recipe():
    r = recipes.get("dapo", lr=3e-5, num_generations=4)
    changed = changed_settings(r)
    assert changed == {"lr": (3e-5, recipes.get("dapo").lr), "num_generations": (4, recipes.get("dapo").num_generations)}
    assert changed_settings(recipes.get("grpo")) == {}


def test_the_page(tmp_path):
    path = write_report(HISTORY, tmp_path / "report.html", title="grpo on add · tiny · 3 steps", summary=SUMMARY,
                        changed={"lr": (3e-5, 1e-4)})
    page = path.read_text()
    assert "<h1>grpo on add · tiny · 3 steps</h1>" in page
    assert re.search(r"<td class='n'>0.2</td><td class='n'>0.35</td><td class='n'>0.15</td>", page)  # before, after
    assert "<td class=''>lr</td><td class='n'>3e-05</td><td class='n'>0.0001</td>" in page
    assert "<td class=''>sample</td><td class='n'>0.3</td><td class=''>75%</td>" in page  # time per stage
    assert "<script src=" not in page and page.count("plotly.js v") >= 1                 # offline: embedded
    assert "prefers-color-scheme: dark" in page and page.count('class="plotly-graph-div"') == 2  # light and dark
    assert '"paper_bgcolor":"rgb(17,17,17)"' in page and '"paper_bgcolor":"white"' in page  # one figure per theme
