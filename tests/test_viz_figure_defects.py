"""Issue 44's figure defects, on the figures' data (the plotly figure, never a screenshot): change labels clear of
the first panel's title, one curve for mean reward and share correct with 0/1 rewards, legends of a few entries
(the lab's, the advantage and KL explorers'),
the GAE explorer's row labels off its strips, run colours that stand apart, no closed fork drawn after a rewind,
"1 point"."""

import itertools
import re

import pytest
import torch

from rlnb import Trainer
from rlnb.lab import LabLoop
from rlnb.viz import AdvantageExplorer, GAEExplorer, KLExplorer, Lab, seed_bands
from rlnb.viz.figures import theme
from rlnb.viz.figures.theme import COLORS, RECIPE_COLORS, recipe_color
from rlnb.viz.figures.train import dashboard_figure
from rlnb.viz.live.dashboard import PANELS
from rlnb.viz.live.lab_dashboard import FORK_MARK


def tiny():
    return Trainer.tiny("grpo", prompts_per_step=2, num_generations=4, max_new_tokens=10)


def legend_entries(fig) -> list:
    if fig.layout.showlegend is False:
        return []
    return [t for t in fig.data if t.showlegend is not False and t.visible is not False]


def domain_top(fig, yref: str) -> float:
    axis = "yaxis" + yref.split()[0].removeprefix("y")
    return fig.layout[axis].domain[1]


def test_change_labels_sit_inside_the_first_panel_below_its_title():
    lab = Lab(tiny(), backend="static")
    lab.step()
    lab.set("beta", 0.05)
    lab.step()
    lab.dashboard.draw()
    fig = lab.dashboard.fig
    assert not [s for s in fig.layout.shapes if s.label.text]           # no label drawn up from a line's top
    labels = [a for a in fig.layout.annotations if a.name == "rlnb-change"]
    assert labels and all(a.yref == "y domain" and a.xref == "x" for a in labels)   # the first panel
    title = fig.layout.annotations[0]                                   # subplot titles come first
    top = domain_top(fig, "y")
    assert title.yanchor == "bottom" and title.y >= top                 # the title stands on the panel's top
    for a in labels:                                                    # each label hangs down from the top
        assert a.yanchor == "top" and a.y <= 1 and a.textangle == -90
    lab.fork(lr=3e-4)                                                   # a change in each branch at one step:
    lab.set("beta", 0.0)
    lab.set("lr", 2e-4, branch="fork")                                  # the fork's lr moved twice: named once
    lab.step()
    texts = [a.text for a in lab.dashboard.fig.layout.annotations if a.name == "rlnb-change"]
    assert sum(t.startswith("lr ") for t in texts) == 1, texts
    at = {}
    for a in lab.dashboard.fig.layout.annotations:
        if a.name == "rlnb-change":
            at.setdefault(a.x, []).append(a.xshift or 0)
    assert max(len(v) for v in at.values()) == 2 and all(len(set(v)) == len(v) for v in at.values())  # side by side
    lab.close()


def test_mean_reward_and_share_correct_are_one_curve_named_for_0_1_rewards():
    same = ([1, 2, 3], [0.0, 0.5, 1.0])
    fig = dashboard_figure(series={"reward": same, "accuracy": same}, panels=[("reward", ("reward", "accuracy"))])
    drawn = [t for t in fig.data if t.visible is not False and t.meta in ("reward", "accuracy")]
    assert len(drawn) == 1 and "0/1 rewards" in drawn[0].name
    assert fig.layout.annotations[0].text.count("━━") == 1              # the panel's key names one curve
    apart = dashboard_figure(series={"reward": same, "accuracy": ([1, 2, 3], [0.0, 0.5, 0.9])},
                             panels=[("reward", ("reward", "accuracy", "eval/pass@1"))])
    assert all(t.visible for t in apart.data)                           # different: both drawn, both in the key
    assert apart.layout.annotations[0].text.count("━━") == 2            # the empty pass@1 is not named


def _series(n=5):
    return {m: (list(range(1, n + 1)), [0.1 * i + j for i in range(n)]) for j, (_, ms) in enumerate(PANELS)
            for m in ms}


def test_the_lab_legend_has_one_entry_per_run_and_the_panels_name_their_curves():
    fig = dashboard_figure(series=_series(), panels=PANELS, fork=_series(), branches=("beta 0", "beta 0.05 from 3"))
    entries = legend_entries(fig)
    assert [t.meta for t in entries] == ["run/main", "run/fork"]
    assert [t.legendgrouptitle.text for t in entries] == ["beta 0", "beta 0.05 from 3"]
    assert [t.line.dash for t in entries] == ["solid", "dash"]
    for k, (_, names) in enumerate(PANELS):                             # a panel of several curves keys them
        drawn = [t for t in fig.data if t.meta in names and t.x and t.visible]
        assert fig.layout.annotations[k].text.count("━━") == (len(drawn) if len(names) > 1 else 0)
    alone = dashboard_figure(series=_series(), panels=PANELS)
    assert legend_entries(alone) == []                                  # one run: the panel titles say it all


def test_the_advantage_explorer_shows_a_few_estimators_and_adds_more_on_request():
    e = AdvantageExplorer(n_groups=50)
    entries = legend_entries(e.fig)
    assert 1 <= len(entries) <= 4 and all(str(t.meta).startswith("odd ") for t in entries)
    e.controls["compare"].value = (*e.controls["compare"].value, "maxrl")
    assert "odd maxrl" in [t.meta for t in legend_entries(e.fig)]
    colours = [t.line.color for t in legend_entries(e.fig)]
    assert all(theme.distinct(a, b) for a, b in itertools.combinations(colours, 2))
    with pytest.raises(ValueError, match="compare: expected estimator names"):
        AdvantageExplorer(compare=("grpo", "nope"))


def test_the_kl_explorer_legend_is_one_entry_per_estimator_drawn():
    e = KLExplorer(n_samples=200)
    entries = legend_entries(e.fig)
    assert [t.meta for t in entries] == ["beta grad k3", "beta grad k1", "beta grad k2"]   # chosen one first
    e.controls["compare"].value = ("k1", "abs")
    assert [t.meta for t in legend_entries(e.fig)] == ["beta grad k3", "beta grad k1", "beta grad abs"]
    hist = {t.meta: t.marker.color for t in e.fig.data if str(t.meta).startswith("samples ")}
    line = {t.meta: t.line.color for t in legend_entries(e.fig)}
    assert all(hist[f"samples {k}"] == line[f"beta grad {k}"] for k in ("k3", "k1", "abs"))  # one colour each


def test_the_gae_explorers_row_labels_stand_off_its_strips():
    mask = torch.ones(3, 5)
    e = GAEExplorer(values=torch.zeros(3, 5), mask=mask, rewards=torch.tensor([1.0, 0.0, 1.0]))
    rows = e.fig.layout.yaxis                                           # the strips' axis (panel 1)
    assert rows.ticklabelstandoff is not None and rows.ticklabelstandoff >= 6
    assert rows.automargin is True                                      # long labels widen the margin, not overlap


def test_every_two_recipe_colours_and_every_run_of_a_figure_stand_apart():
    distinct, run_colors = theme.distinct, theme.run_colors
    assert not distinct("#0072B2", "#56B4E9")                           # the check can fail: 16's two blues
    for (a, ca), (b, cb) in itertools.combinations(RECIPE_COLORS.items(), 2):
        assert distinct(ca, cb), (a, b, ca, cb)
    runs = {"grpo": [[1.0, 0.9], [1.1, 0.8]], "mine": [[1.0, 1.0], [1.1, 0.9]]}
    fig = seed_bands(runs, title="t", yaxis="entropy", colors={"grpo": recipe_color("grpo"),
                                                               "mine": COLORS["accent"]})  # as 16 asked
    lines = [t.line.color for t in fig.data if t.mode == "lines" and t.showlegend is not False]
    assert len(lines) == 2 and distinct(*lines)
    assert run_colors(["grpo", "rloo"]) == {"grpo": recipe_color("grpo"), "rloo": recipe_color("rloo")}
    picked = run_colors(["a", "b", "c", "d"])
    assert all(distinct(x, y) for x, y in itertools.combinations(picked.values(), 2))
    assert run_colors(["k1", "k8"], {"k1": "#9A8700", "k8": "#9A8700"}) == {"k1": "#9A8700", "k8": "#9A8700"}
    assert theme._lab("#ffffff")[0] == pytest.approx(100, abs=0.01)


def test_after_a_rewind_a_closed_fork_leaves_nothing_on_the_panels():
    lab = Lab(tiny(), backend="static")
    lab.step()
    lab.step()
    lab.fork(beta=0.05)
    lab.set("lr", 3e-4, branch="fork")
    lab.step()
    lab.step()
    fig = lab.dashboard.fig
    assert any(s.line.color == FORK_MARK for s in fig.layout.shapes)   # the fork's change line, while it runs
    lab.close_fork()
    lab.rewind(2)                                                       # back to the fork point
    fig = lab.dashboard.fig
    assert not any(s.line.color == FORK_MARK for s in fig.layout.shapes)
    assert not any(a.font.color == FORK_MARK for a in fig.layout.annotations if a.name == "rlnb-change")
    assert not any(str(t.meta).startswith(("fork/", "run/")) for t in fig.data) and legend_entries(fig) == []
    lab.close()


def test_one_kept_point_is_one_point():
    loop = LabLoop(tiny(), knobs=("beta",))
    assert re.fullmatch(r"kept step 0 \(1 point, \d+ MiB\)", loop.kept_text())
    loop.step()
    loop.keep()
    assert re.fullmatch(r"kept steps 0, 1 \(2 points, \d+ MiB\)", loop.kept_text())
    loop.close()
