"""Pure figure builders for the algorithm explorers: numbers in, ``plotly.graph_objects.Figure`` out.

No widgets and no kernel needed; the explorers call these and copy the result into the live figure.
Every trace has a unique ``name``; ``trace(fig, name)`` finds one. The trace order of each builder is
fixed (listed in its docstring) so a live figure can be updated in place.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from rlnb.viz.figures.theme import COLORS, key_html, run_colors, themed


def np_(x) -> np.ndarray:
    """A torch tensor, list or array as a float numpy array."""
    return np.asarray(x.detach().double().cpu().numpy() if hasattr(x, "detach") else x, dtype=float)


def trace(fig: go.Figure, name: str):
    """The trace whose key (``meta``, e.g. a metric's history key) or name is ``name`` (KeyError listing the
    names if there is none)."""
    for t in fig.data:
        if t.meta == name or t.name == name:
            return t
    raise KeyError(f"no trace {name!r}; traces: {[t.meta or t.name for t in fig.data]}")


def _fade(selected: str | None, name: str) -> dict:
    """The selected registry entry is drawn bold, the others thin and faded."""
    return {} if selected in (None, name) else {"opacity": 0.35}


def advantage_figure(*, rewards, adv, dist_right, dist_wrong, gaps, odd: dict, selected: str | None = None,
                     labels: Sequence[str] | None = None, title: str = "Advantages") -> go.Figure:
    """Three panels: one group's rewards and advantages; advantages of right vs wrong completions over
    many groups; |A| of the odd one out vs its reward gap, one line per estimator, each in its recipe's colour.

    Traces: 0 ``reward``, 1 ``advantage`` (per completion), 2 ``A right``, 3 ``A wrong`` (histograms),
    then one per key of ``odd``, named by the estimator (``meta`` ``odd <estimator>``, the hook ``trace`` finds; the
    chosen one bold). The legend holds the estimators only; the first two
    panels name their bars in their titles (``theme.key_html``).
    """
    labels = list(labels) if labels is not None else [f"o{i}" for i in range(len(rewards))]
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.1, subplot_titles=(  # short: a third of the width each
        "this group<br>" + key_html([("reward", COLORS["ref"]), ("A > 0", COLORS["right"]), ("A < 0", COLORS["wrong"])],
                               "■"),
        "over many groups<br>" + key_html([("A of right ones", COLORS["right"]), ("A of wrong ones", COLORS["wrong"])],
                                     "■"),
        "the odd one out"))
    fig.add_bar(x=labels, y=np_(rewards), name="reward", marker_color=COLORS["ref"], row=1, col=1, showlegend=False)
    colors = [COLORS["right"] if a > 0 else COLORS["wrong"] for a in np_(adv)]
    fig.add_bar(x=labels, y=np_(adv), name="advantage", marker_color=colors, row=1, col=1, showlegend=False)
    # an explicit category list: a live figure otherwise keeps the categories of earlier, larger groups
    fig.update_xaxes(categoryorder="array", categoryarray=labels, row=1, col=1)
    for name, vals, color in (("A right", dist_right, COLORS["right"]), ("A wrong", dist_wrong, COLORS["wrong"])):
        fig.add_histogram(x=np_(vals), name=name, marker_color=color, opacity=0.6, nbinsx=60, showlegend=False,
                          histnorm="probability", row=1, col=2)
    palette = run_colors(odd)
    for name, vals in odd.items():
        fig.add_scatter(x=np_(gaps), y=np_(vals), name=name, meta=f"odd {name}", mode="lines", row=1, col=3,
                        line=dict(width=3 if name == selected else 1.5, color=palette[name]),
                        opacity=None if selected in (None, name) else 0.7)  # a few lines: faded, still seen on dark
    fig.update_xaxes(type="log", title_text="reward gap", row=1, col=3)
    fig.update_xaxes(title_text="advantage", row=1, col=2)
    fig.update_xaxes(title_text="completion", row=1, col=1)
    fig.update_yaxes(title_text="reward, advantage", row=1, col=1)
    fig.update_yaxes(title_text="share of completions", row=1, col=2)
    fig.update_yaxes(title_text="|A| of the odd one", row=1, col=3)
    fig.update_layout(title=dict(text=title, y=1 - 24 / 400, yanchor="middle"), barmode="group", bargap=0.15,
                      height=400, margin=dict(t=90), legend=dict(title_text="estimator"))
    return themed(fig)


def _runs(x: np.ndarray, flags: np.ndarray) -> list[tuple[float, float]]:
    """(start, end) x-intervals where ``flags`` is True, e.g. the clipped part of the ratio grid."""
    f = np.concatenate([[False], np.asarray(flags, dtype=bool), [False]]).astype(int)
    starts, ends = np.nonzero(np.diff(f) == 1)[0], np.nonzero(np.diff(f) == -1)[0] - 1
    return [(float(x[a]), float(x[b])) for a, b in zip(starts, ends, strict=True)]


def clip_figure(*, rho, objective, weight, reference, low, high, tokens: dict | None = None,
                title: str = "Clipping") -> go.Figure:
    """Surrogate objective (row 1) and gradient weight (row 2) vs the ratio rho for A > 0 (left) and
    A < 0 (right); row 3 the ratios of a real batch's tokens, clipped ones on top. Clip regions of
    the grid are shaded (``low``/``high``: (2, N) bool). ``objective`` etc. are (2, N): row 0 is A > 0.

    Traces: 0 ``objective A>0``, 1 ``objective A<0``, 2 ``weight A>0``, 3 ``weight A<0``,
    4 ``rho A A>0``, 5 ``rho A A<0`` (unclipped reference), 6 ``tokens A>0``, 7 ``clipped A>0``,
    8 ``tokens A<0``, 9 ``clipped A<0``.
    """
    fig = make_subplots(rows=3, cols=2, shared_xaxes=True, vertical_spacing=0.07, horizontal_spacing=0.08,
                        row_heights=[0.4, 0.35, 0.25], subplot_titles=(
                            "objective, A > 0", "objective, A < 0", "gradient weight on grad logp", "",
                            "batch tokens", ""))
    x = np_(rho)
    for row, key in ((1, "objective"), (2, "weight")):
        vals = np_({"objective": objective, "weight": weight}[key])
        for col, sign in ((1, ">"), (2, "<")):
            fig.add_scatter(x=x, y=vals[col - 1], name=f"{key} A{sign}0", mode="lines", row=row, col=col,
                            line=dict(color=COLORS["pi"], width=3))
    ref = np_(reference)
    for col, sign in ((1, ">"), (2, "<")):
        fig.add_scatter(x=x, y=ref[col - 1], name=f"rho A A{sign}0", mode="lines", row=1, col=col,
                        line=dict(color=COLORS["ref"], dash="dot"))
    tok = tokens or {"ratio": [], "adv": [], "low": [], "high": []}
    r, a = np_(tok["ratio"]), np_(tok["adv"])
    cut = np.asarray(tok["low"], dtype=bool) | np.asarray(tok["high"], dtype=bool)
    for col, sign, side in ((1, ">", a > 0), (2, "<", a < 0)):
        bins = dict(start=float(x[0]), end=float(x[-1]), size=float(x[-1] - x[0]) / 60)
        fig.add_histogram(x=r[side & ~cut], name=f"tokens A{sign}0", xbins=bins, marker_color=COLORS["ref"],
                          row=3, col=col)
        fig.add_histogram(x=r[side & cut], name=f"clipped A{sign}0", xbins=bins, row=3, col=col,
                          marker_color=COLORS["high" if sign == ">" else "low"])
    lo, hi = np.asarray(low, dtype=bool), np.asarray(high, dtype=bool)
    for col in (1, 2):
        for flags, color in ((lo[col - 1], COLORS["low"]), (hi[col - 1], COLORS["high"])):
            for x0, x1 in _runs(x, flags):
                for row in (1, 2):
                    fig.add_vrect(x0=x0, x1=x1, fillcolor=color, opacity=0.18, line_width=0, row=row, col=col)
    fig.update_xaxes(title_text="ratio rho = pi / pi_old", row=3)
    for row, name in ((1, "objective"), (2, "weight"), (3, "tokens")):
        fig.update_yaxes(title_text=name, title_standoff=2, row=row, col=1)
        fig.update_yaxes(title_text=name, title_standoff=2, row=row, col=2)
    fig.update_layout(title=title, barmode="stack", height=560, showlegend=False)
    return themed(fig)


def kl_figure(*, x, pi_pdf, ref_pdf, samples: dict, true_kl: float, d, weights: dict, beta: float, A: float,
              selected: str | None = None, title: str = "KL estimators") -> go.Figure:
    """pi and pi_ref (top left); each estimator's per-sample values with the true KL (top right); their
    bias and std (bottom left); beta times each estimator's gradient weight vs d = logp - ref_logp
    against the policy term's weight +-A (bottom right).

    Traces (``meta``, the hook ``trace`` finds): 0 ``pi``, 1 ``pi_ref``, then ``samples <k>`` for each key of
    ``samples``, then ``bias``, ``std`` (bars over the estimators), then ``beta grad <k>`` for each key of
    ``weights``, then ``policy +A``, ``policy -A``. Each estimator has one colour in both panels and one legend
    entry, named by it; the other curves are named in their panels' titles (``theme.key_html``).
    """
    fig = make_subplots(rows=2, cols=2, vertical_spacing=0.22, horizontal_spacing=0.12, subplot_titles=(
        "pi and pi_ref<br>" + key_html([("pi", COLORS["pi"]), ("pi_ref", COLORS["ref"])]),
        "per-sample estimates<br>" + key_html([("true KL", COLORS["wrong"])], "┆"),
        "bias and std per estimator<br>" + key_html([("bias", COLORS["wrong"]), ("std", COLORS["pi"])], "■"),
        "weight on grad logp: beta*KL vs policy<br>" + key_html([("+A", COLORS["right"]), ("-A", COLORS["wrong"])],
                                                                 "┄")))
    hidden = dict(showlegend=False)
    fig.add_scatter(x=np_(x), y=np_(pi_pdf), name="pi", meta="pi", line_color=COLORS["pi"], row=1, col=1, **hidden)
    fig.add_scatter(x=np_(x), y=np_(ref_pdf), name="pi_ref", meta="pi_ref", line_color=COLORS["ref"], row=1, col=1,
                    **hidden)
    palette = run_colors(dict.fromkeys([*samples, *weights]))
    for name, vals in samples.items():
        fig.add_histogram(x=np_(vals), name=name, meta=f"samples {name}", nbinsx=80, histnorm="probability",
                          row=1, col=2, opacity=0.6 if name == selected else 0.25, marker_color=palette[name],
                          legendgroup=name, **hidden)
    fig.add_vline(x=true_kl, line_dash="dash", line_color=COLORS["wrong"], row=1, col=2)
    names = list(samples)
    side = dict(width=0.4)  # side by side: the figure overlays bars (for the histograms), std hid the bias
    fig.add_bar(x=names, y=[float(np_(v).mean() - true_kl) for v in samples.values()], name="bias", meta="bias",
                row=2, col=1, marker_color=COLORS["wrong"], offset=-0.4, **side, **hidden)
    fig.add_bar(x=names, y=[float(np_(v).std()) for v in samples.values()], name="std", meta="std", row=2, col=1,
                marker_color=COLORS["pi"], offset=0.0, **side, **hidden)
    for name, w in weights.items():
        fig.add_scatter(x=np_(d), y=beta * np_(w), name=name, meta=f"beta grad {name}", mode="lines", row=2, col=2,
                        line=dict(width=3 if name == selected else 1.5, color=palette[name]), legendgroup=name,
                        opacity=None if selected in (None, name) else 0.7)
    dd = np_(d)
    for sign in (1, -1):
        label = f"policy {'+' if sign > 0 else '-'}A"
        fig.add_scatter(x=dd[[0, -1]], y=[sign * A] * 2, name=label, meta=label, mode="lines", row=2, col=2,
                        line=dict(color=COLORS["right" if sign > 0 else "wrong"], dash="dot"), **hidden)
    fig.update_xaxes(title_text="d = logp - ref_logp", row=2, col=2)
    for (row, col), (xt, yt) in {(1, 1): ("x", "density"), (1, 2): ("estimate", "share of samples"),
                                 (2, 1): ("estimator", "bias, std"), (2, 2): (None, "weight")}.items():
        if xt:
            fig.update_xaxes(title_text=xt, row=row, col=col)
        fig.update_yaxes(title_text=yt, title_standoff=2, row=row, col=col)
    fig.update_layout(title=dict(text=title, y=1 - 24 / 680, yanchor="middle"), barmode="overlay", height=680,
                      margin=dict(t=100), legend=dict(title_text="estimator"))
    return themed(fig)


def aggregation_figure(*, labels: Sequence[str], per_token: dict, push: dict, selected: str | None = None,
                       title: str = "Aggregation") -> go.Figure:
    """Per-token weight d agg / d loss of each completion's tokens (top) and the total push on each
    completion, sum_t weight * A (bottom), one bar series per aggregation.

    Traces: ``token weight <agg>`` for each key of ``per_token``, then ``push <agg>`` for each of ``push``.
    """
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1, subplot_titles=(
        "weight of each token's loss (d agg / d loss_t)", "push on the whole completion: sum_t weight * A"))
    for row, key, data in ((1, "token weight", per_token), (2, "push", push)):
        for name, vals in data.items():
            fig.add_bar(x=list(labels), y=np_(vals), name=f"{key} {name}", row=row, col=1,
                        legendgroup=name, showlegend=row == 1, **_fade(selected, name))
    fig.update_layout(title=title, barmode="group", height=520)
    fig.update_xaxes(categoryorder="array", categoryarray=list(labels))  # stale categories otherwise linger
    fig.update_xaxes(title_text="completion", row=2, col=1)
    fig.update_yaxes(title_text="weight per token", row=1, col=1)
    fig.update_yaxes(title_text="push (sum of weight x A)", row=2, col=1)
    return themed(fig)
