"""Pure figure builders: hand-made numbers in, the expected traces out. No kernel, no widgets."""


import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest

from rlnb.viz import set_theme
from rlnb.viz.figures.theme import COLORS, axis_title, metric_label
from rlnb.viz.figures.train import dashboard_figure, entropy_figure, xray_figure
from rlnb.viz.figures.zoo import advantage_figure, aggregation_figure, clip_figure, kl_figure, trace


def names(fig):
    return [t.name for t in fig.data]


def test_advantage_figure_traces_and_highlight():
    fig = advantage_figure(rewards=[1, 0, 0, 0], adv=[1.5, -0.5, -0.5, -0.5], dist_right=[1.5, 0.5],
                           dist_wrong=[-0.5], gaps=[0.01, 0.1], odd={"a": [1.5, 1.5], "b": [0.0075, 0.075]},
                           selected="a")
    assert isinstance(fig, go.Figure)
    assert names(fig) == ["reward", "advantage", "A right", "A wrong", "a", "b"]
    assert [t.meta for t in fig.data][4:] == ["odd a", "odd b"]                  # the hook trace() finds
    assert list(trace(fig, "advantage").y) == [1.5, -0.5, -0.5, -0.5]
    assert list(trace(fig, "advantage").marker.color) == [COLORS["right"]] + [COLORS["wrong"]] * 3
    assert list(trace(fig, "A wrong").x) == [-0.5]
    assert trace(fig, "odd a").line.width == 3 and trace(fig, "odd a").opacity is None
    assert trace(fig, "odd b").opacity == pytest.approx(0.7)
    assert fig.layout.xaxis3.type == "log"
    with pytest.raises(KeyError, match="odd c"):
        trace(fig, "odd c")


def test_clip_figure_shades_clip_regions_and_splits_batch_tokens():
    rho = np.array([0.5, 1.0, 1.5])
    low = np.array([[False, False, False], [True, False, False]])       # A < 0 clipped at rho 0.5
    high = np.array([[False, False, True], [False, False, False]])      # A > 0 clipped at rho 1.5
    obj = np.array([[0.5, 1.0, 1.2], [-0.8, -1.0, -1.5]])
    tokens = {"ratio": [0.5, 1.0, 1.5], "adv": [-1.0, 1.0, 1.0], "low": [True, False, False],
              "high": [False, False, True]}
    fig = clip_figure(rho=rho, objective=obj, weight=obj, reference=obj, low=low, high=high, tokens=tokens)
    assert names(fig) == ["objective A>0", "objective A<0", "weight A>0", "weight A<0", "rho A A>0", "rho A A<0",
                          "tokens A>0", "clipped A>0", "tokens A<0", "clipped A<0"]
    assert list(fig.data[1].y) == [-0.8, -1.0, -1.5]
    assert list(trace(fig, "tokens A>0").x) == [1.0] and list(trace(fig, "clipped A>0").x) == [1.5]
    assert list(trace(fig, "clipped A<0").x) == [0.5] and len(trace(fig, "tokens A<0").x) == 0
    # one shaded rectangle per clipped run, in the objective and the weight row of its column
    spans = sorted((s.x0, s.x1, s.fillcolor) for s in fig.layout.shapes)
    assert spans == [(0.5, 0.5, COLORS["low"])] * 2 + [(1.5, 1.5, COLORS["high"])] * 2


def test_kl_figure_bias_std_and_scaled_weights():
    fig = kl_figure(x=[0, 1], pi_pdf=[0.1, 0.2], ref_pdf=[0.2, 0.1], samples={"k1": [0.0, 1.0], "k2": [0.5, 0.5]},
                    true_kl=0.5, d=[-1.0, 0.0, 1.0], weights={"k1": [-1, -1, -1], "k2": [1, 0, -1]}, beta=0.1, A=2.0,
                    selected="k2")
    assert [t.meta for t in fig.data] == ["pi", "pi_ref", "samples k1", "samples k2", "bias", "std", "beta grad k1",
                                          "beta grad k2", "policy +A", "policy -A"]
    assert [t.name for t in fig.data if t.showlegend is not False] == ["k1", "k2"]   # one entry per estimator
    assert list(trace(fig, "bias").y) == [0.0, 0.0]                 # both sample means equal 0.5
    assert list(trace(fig, "std").y) == [0.5, 0.0]                  # population std of {0, 1} and {.5, .5}
    assert np.allclose(trace(fig, "beta grad k2").y, [0.1, 0.0, -0.1])
    assert list(trace(fig, "policy -A").y) == [-2.0, -2.0]


def test_aggregation_figure_one_series_per_aggregation_and_row():
    fig = aggregation_figure(labels=["o0", "o1"], per_token={"x": [0.5, 0.25], "y": [1, 1]},
                             push={"x": [1, -1], "y": [2, -2]}, selected="y")
    assert names(fig) == ["token weight x", "token weight y", "push x", "push y"]
    assert list(trace(fig, "push y").y) == [2, -2] and trace(fig, "push x").opacity == pytest.approx(0.35)
    assert trace(fig, "push x").yaxis == "y2" and trace(fig, "token weight x").yaxis == "y"


def test_entropy_figure_masks_padding_and_draws_target():
    fig = entropy_figure(token_entropy=[[0.5, 0.7], [0.2, 0.9]], mask=[[1, 1], [1, 0]], row_labels=["a", "b"],
                         steps=[1, 2, 3], entropy=[0.6, 0.4, 0.3], target=0.35, coef=[0, 0, 0.001])
    assert names(fig) == ["token entropy", "entropy", "target", "thermostat coef"]
    assert [list(r) for r in fig.data[0].z] == [[0.5, 0.7], [0.2, None]]   # padding: a blank cell
    assert list(trace(fig, "target").x) == [1, 3] and list(trace(fig, "target").y) == [0.35, 0.35]
    assert trace(fig, "thermostat coef").yaxis != trace(fig, "entropy").yaxis    # its own axis


def test_dashboard_figure_gaps_and_empty_series():
    panels = [("reward", ("reward", "accuracy")), ("length", ("len",))]
    fig = dashboard_figure(series={"reward": ([1, 2], [0.1, None]), "len": ([1, 2], [3, float("nan")])}, panels=panels)
    assert [t.meta for t in fig.data] == ["reward", "accuracy", "len"]            # keys: the stable hook
    assert names(fig)[:2] == ["mean reward", "share correct (sampled)"]         # labels: what a learner reads
    assert fig.layout.xaxis.title.text == fig.layout.xaxis2.title.text == "training step"
    assert list(trace(fig, "reward").y) == [0.1, None]
    assert len(trace(fig, "accuracy").x) == 0
    assert trace(fig, "len").xaxis == "x2" and list(trace(fig, "len").y) == [3, None]  # NaN is not JSON
    # each panel's y axis says what it measures: the shared unit, else the metrics' units or labels
    assert fig.layout.yaxis.title.text == "reward / share" and fig.layout.yaxis2.title.text == "len"
    clip = dashboard_figure(series={}, panels=[("clip", ("clip_ratio/low_mean",)), ("reward", ("reward",))])
    assert (clip.layout.yaxis.rangemode, clip.layout.yaxis2.rangemode) == ("nonnegative", "normal")  # 0 at the bottom


def test_axis_titles_and_labels_for_unknown_keys():
    assert axis_title(["clip_ratio/low_mean", "clip_ratio/high_mean"]) == "share of tokens"
    assert axis_title(["entropy"]) == "nats per token"
    assert axis_title(["reward", "accuracy", "eval/pass@1"]) == "reward / share"                  # each unit once
    assert metric_label("rewards/format/mean") == "paid for the format (share)"
    assert metric_label("rewards/brevity/mean") == "reward part 'brevity' (mean)"   # any reward part, not raw
    assert metric_label("some_new_key") == "some_new_key"


def test_xray_figure_cells_text_and_clip_marks():
    tokens = [["4", "6", "<eos>"], ["4", "<eos>"]]
    mask = np.array([[1, 1, 1], [1, 1, 0]])
    adv_ratio = np.array([[0.5, 0.6, 0.5], [-1.0, -1.2, 0.0]])
    low = np.array([[0, 0, 0], [0, 1, 1]], dtype=bool)                   # (1, 2) is padding: not drawn
    high = np.array([[0, 1, 0], [0, 0, 0]], dtype=bool)
    fig = xray_figure(tokens=tokens, adv_ratio=adv_ratio, mask=mask, ratio=np.ones((2, 3)), entropy=np.ones((2, 3)),
                      kl=None, weight=adv_ratio, low=low, high=high, row_labels=["r0", "r1"])
    assert names(fig) == ["A x ratio", "clipped low", "clipped high"]
    hm = fig.data[0]
    assert [list(r) for r in hm.text] == [["4", "6", "∎"], ["4", "∎", ""]]                  # what fits in a cell
    assert [list(r) for r in hm.hovertext] == [["4", "6", "<eos>"], ["4", "<eos>", ""]]    # the whole token
    assert hm.z[1][2] is None and hm.z[1][1] == -1.2 and hm.zmid == 0      # None: a blank cell
    assert (list(fig.data[1].x), list(fig.data[1].y)) == ([1], [1])
    assert (list(fig.data[2].x), list(fig.data[2].y)) == ([1], [0])


def test_theme_switch_changes_template_of_new_figures():
    dark_bg = pio.templates["plotly_dark"].layout.paper_bgcolor
    build = lambda: dashboard_figure(series={}, panels=[("a", ("a",))])  # noqa: E731
    try:
        set_theme("dark")
        assert build().layout.template.layout.paper_bgcolor == dark_bg
        set_theme("light")
        assert build().layout.template.layout.paper_bgcolor != dark_bg
        with pytest.raises(ValueError, match="name: expected one of"):
            set_theme("solarized")
    finally:
        set_theme("light")


def test_categorical_axes_list_exactly_the_current_completions():
    """A live figure keeps categories it saw earlier unless the axis lists them: the builders must."""
    from rlnb.viz.figures.zoo import aggregation_figure

    labels = ["o0 right |o|=5", "o1 wrong |o|=9"]
    fig = aggregation_figure(labels=labels, per_token={"token-mean": [0.1, 0.1]}, push={"token-mean": [1.0, -1.0]})
    assert list(fig.layout.xaxis.categoryarray) == labels and list(fig.layout.xaxis2.categoryarray) == labels


def test_recipe_colours_are_distinct_and_stable_and_labels_are_human():
    from rlnb.recipes import names
    from rlnb.viz.figures.theme import metric_label, recipe_color

    colours = [recipe_color(n) for n in names()]
    assert len(set(colours)) == len(colours)                     # one colour per recipe
    assert recipe_color("my_recipe") == recipe_color("my_recipe") and recipe_color("my_recipe") not in colours
    assert metric_label("frac_reward_zero_std") == "groups with no signal (share)"
    assert metric_label("hp/beta") == "beta (knob)" and metric_label("unknown/x") == "unknown/x"


def test_themed_keeps_a_figures_own_margins_and_unsyncs_a_second_y_axis():
    import plotly.graph_objects as go

    from rlnb.viz.figures.theme import themed

    fig = go.Figure()
    fig.update_layout(yaxis2=dict(overlaying="y", side="right"), margin=dict(b=110))
    themed(fig)
    assert (fig.layout.margin.b, fig.layout.margin.l) == (110, 50)     # the caller's room for a legend is kept
    assert fig.layout.yaxis2.tickmode == "auto" and fig.layout.yaxis2.showgrid is False
    assert fig.layout.yaxis.tickmode is None                             # the first axis is left alone


def _contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two #rrggbb colours."""
    def lum(h):
        c = [int(h.lstrip("#")[i:i + 2], 16) / 255 for i in (0, 2, 4)]
        c = [x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4 for x in c]
        return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]
    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_every_recipe_colour_reads_on_a_light_and_a_dark_background():
    from rlnb.viz.figures.theme import _EXTRA, RECIPE_COLORS

    assert _contrast("#F0E442", "#ffffff") < 2.2                         # the check can fail: the old yellow
    for name, colour in [*RECIPE_COLORS.items(), *(("extra", c) for c in _EXTRA)]:
        assert min(_contrast(colour, "#ffffff"), _contrast(colour, "#111111")) >= 2.2, (name, colour)
    assert not set(_EXTRA) & set(RECIPE_COLORS.values())


def test_the_starting_theme_follows_jupyterlab_settings_or_rlnb_theme(tmp_path):
    from rlnb.viz.figures.theme import detect_theme

    settings = tmp_path / "@jupyterlab" / "apputils-extension" / "themes.jupyterlab-settings"
    env = {"JUPYTERLAB_SETTINGS_DIR": str(tmp_path)}
    assert detect_theme(env) == "light"                                    # no settings saved: light
    settings.parent.mkdir(parents=True)
    settings.write_text('{\n  // the theme, chosen in Settings\n  "theme": "JupyterLab Dark"\n}')
    assert detect_theme(env) == "dark"                                     # comments are allowed there
    settings.write_text('{"theme": "JupyterLab Light", "theme-scrollbars": false}')
    assert detect_theme(env) == "light"
    assert detect_theme({**env, "RLNB_THEME": "dark"}) == "dark"           # the variable wins
    with pytest.raises(ValueError, match="RLNB_THEME: expected one of"):
        detect_theme({"RLNB_THEME": "solarized"})
