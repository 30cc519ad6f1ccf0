"""Pure figure builders for training: per-token entropy, the dashboard, the token X-ray.

Like ``figures.py``: numbers in, ``plotly.graph_objects.Figure`` out, fixed trace order, unique names.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from rlnb.viz.figures.theme import (
    COLORS,
    NONNEGATIVE,
    axis_title,
    key_html,
    metric_label,
    same_line_label,
    themed,
)
from rlnb.viz.figures.zoo import np_


def masked(x, mask) -> np.ndarray:
    """``x`` as a float array with NaN where ``mask`` is 0."""
    out = np_(x).copy()
    out[np_(mask) == 0] = np.nan
    return out


def gaps(a: np.ndarray) -> list:
    """Nested lists with None for NaN: blank heatmap cells. (A FigureWidget cannot send NaN inside a
    2-D array: it is not valid JSON; 1-D arrays travel as binary and may hold NaN.)"""
    return np.where(np.isnan(a), None, a).tolist()


def entropy_figure(*, token_entropy, mask, row_labels: Sequence[str], steps, entropy, target: float,
                   coef, title: str = "Entropy") -> go.Figure:
    """Per-token entropy of one batch (heatmap, top) and mean entropy over training with the
    thermostat's target and the coefficient it would have used (bottom, coefficient on the right axis).

    Traces: 0 ``token entropy``, 1 ``entropy``, 2 ``target``, 3 ``thermostat coef``.
    """
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.22, row_heights=[0.45, 0.55],  # room for t's title
                        specs=[[{}], [{"secondary_y": True}]],
                        subplot_titles=("per-token entropy of one batch (nats)", "entropy over training"))
    z = gaps(masked(token_entropy, mask))
    fig.add_heatmap(z=z, y=list(row_labels), colorscale="Viridis", name="token entropy", row=1, col=1,
                    colorbar=dict(len=0.4, y=0.8, title="nats"), hovertemplate="%{y} t=%{x}: H=%{z:.3f}<extra></extra>")
    s = list(steps)
    fig.add_scatter(x=s, y=list(entropy), name="entropy", mode="lines", line_color=COLORS["pi"], row=2, col=1)
    ends = [s[0], s[-1]] if s else []
    fig.add_scatter(x=ends, y=[target] * len(ends), name="target", mode="lines", row=2, col=1,
                    line=dict(color=COLORS["wrong"], dash="dash"))
    fig.add_scatter(x=s, y=list(coef), name="thermostat coef", mode="lines", line=dict(color=COLORS["ref"]),
                    row=2, col=1, secondary_y=True)
    fig.update_yaxes(autorange="reversed", title_text="completion", row=1, col=1)
    fig.update_xaxes(title_text="token position t", row=1, col=1)
    fig.update_yaxes(title_text="coef", secondary_y=True, row=2, col=1)
    fig.update_yaxes(title_text="entropy (nats per token)", secondary_y=False, row=2, col=1)
    fig.update_xaxes(title_text="step", row=2, col=1)
    fig.update_layout(title=title, height=640, legend=dict(orientation="h", y=-0.12))
    return themed(fig)


# Metrics whose meaning has a colour everywhere in rlnb (right/wrong, clipped low/high).
METRIC_COLORS = {
    "accuracy": COLORS["right"], "completions/mean_length_correct": COLORS["right"],
    "completions/mean_length_wrong": COLORS["wrong"], "clip_ratio/low_mean": COLORS["low"],
    "clip_ratio/high_mean": COLORS["high"], "eval/pass@1": COLORS["accent"],
}


def dashboard_figure(*, series: dict, panels: Sequence[tuple[str, Sequence[str]]],
                     title: str = "Training", fork: dict | None = None,
                     branches: tuple[str, str] | None = None) -> go.Figure:
    """One panel per ``(title, metric names)``; ``series`` maps a metric name to ``(steps, values)``
    (None values leave gaps). Metrics without a series get an empty trace so the layout is fixed.

    Traces: one per metric, in panel order, named by its human label (``metric_label``, what hover shows); ``meta``
    holds the metric's key (the stable hook tests read). Every x axis is the training step; evaluation points are
    marked. The legend names runs, not metrics (18 entries do not read): a panel of several curves names them under
    its title, in their colours (``panel_keys``). ``fork``: a second branch's series, overlaid dashed in the same
    colours (``meta`` ``"fork/<key>"``; metrics it lacks, evaluations say, are left out); ``branches``: the two
    runs' legend group titles, by what differs (``("beta 0", "beta 0.05 from step 30")``), each run one legend
    entry (``meta`` ``"run/main"``, ``"run/fork"``). Without ``branches``: one run, no legend.
    """
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[p[0] for p in panels], vertical_spacing=0.2,
                        horizontal_spacing=0.07)
    runs = [(series, "", "solid")] + ([(fork, "fork/", "dash")] if fork is not None else [])
    for side, (data, prefix, dash) in enumerate(runs):
        group = dict(legendgroup=prefix or "main", legendgrouptitle_text=branches[side]) if branches else {}
        for k, (_, names) in enumerate(panels):
            for j, name in enumerate(names):
                if prefix and not data.get(name, ((),))[0]:  # the fork draws what it has (no evaluations)
                    continue
                x, y = data.get(name, ([], []))
                y = [None if v is None or v != v else v for v in y]        # None leaves a gap; NaN is not JSON
                sparse = len(x) < 30 or name.startswith("eval/")            # evaluations: a marker at each point
                fig.add_scatter(x=list(x), y=y, name=metric_label(name), meta=prefix + name, visible=True,
                                showlegend=False, mode="lines+markers" if sparse else "lines",
                                row=k // cols + 1, col=k % cols + 1,
                                line=dict(color=metric_color(name, j), dash=dash),
                                marker_size=7 if name.startswith("eval/") else 4, **group)
        if branches:  # the run's one legend entry, its line style under its title (a click hides the whole run)
            fig.add_scatter(x=[None], y=[None], mode="lines", name="fork (dashed)" if side else "main (solid)",
                            meta="run/" + ("fork" if side else "main"), hoverinfo="skip", showlegend=True,
                            line=dict(color=COLORS["ref"], dash=dash, width=2), **group)
    _merge_identical(fig)
    top = max(panel_keys(fig, panels)[:cols], default=0) * KEY_LINE  # the first row's keys grow up into the margin
    fig.update_xaxes(title_text="training step", title_standoff=4)
    for k, (_, names) in enumerate(panels):
        fig.update_yaxes(title_text=axis_title(names), title_standoff=2, row=k // cols + 1, col=k % cols + 1,
                         rangemode="nonnegative" if set(names) <= NONNEGATIVE else "normal")
    height = 290 * rows + 90 + top
    fig.update_layout(title=dict(text=title, y=1 - 28 / height, yanchor="middle"), height=height,
                      margin=dict(t=70 + top), showlegend=bool(branches), legend=dict(orientation="h", y=-0.12 / rows))
    return themed(fig)


KEY_LINE = 20   # px per line of a panel's key (font 11, plotly's line spacing)
KEY_WIDTH = 46  # characters per key line: a panel is a third of a notebook's width


def metric_color(name: str, j: int) -> str:
    """A metric's colour: its meaning's (right, wrong, clipped low/high) where it has one, else by its place."""
    return METRIC_COLORS.get(name, (COLORS["pi"], COLORS["accent"], COLORS["ref"])[j % 3])


def panel_keys(fig: go.Figure, panels) -> list[int]:
    """Under the title of each panel with several metrics, the names of its main run's curves in their colours
    (``━━ mean reward · ━━ held-out pass@1``), wrapped at ``KEY_WIDTH``; returns each panel's number of key lines."""
    counts = []
    for k, (head, names) in enumerate(panels):
        axis = "x" if k == 0 else f"x{k + 1}"
        shown = [t for t in fig.data if t.xaxis == axis and t.visible and t.x and str(t.meta) in names]  # drawn
        lines: list[list] = []
        for t in shown if len(names) > 1 else []:
            if not lines or sum(len(u.name) + 5 for u in lines[-1]) + len(t.name) > KEY_WIDTH:
                lines.append([])
            lines[-1].append(t)
        counts.append(len(lines))
        if lines:
            text = "<br>".join(key_html([(t.name, t.line.color) for t in line]) for line in lines)
            fig.layout.annotations[k].text = f"{head}<br>{text}"
    return counts


def _merge_identical(fig: go.Figure) -> None:
    """Two curves of one panel that are the same line (mean reward and share correct, when rewards are 0 or 1)
    become one, named for both (``theme.same_line_label``): drawn on top of each other, one would be a name with
    no line of its own."""
    seen: dict[tuple, go.Scatter] = {}
    for t in fig.data:
        if not t.x or str(t.meta).startswith("run/"):
            continue
        key = (t.xaxis, t.legendgroup, tuple(t.x), tuple(t.y))
        first = seen.setdefault(key, t)
        if first is not t:
            first.name = same_line_label(str(first.meta).removeprefix("fork/"), str(t.meta).removeprefix("fork/"))
            t.visible, t.showlegend = False, False


def cell_text(token: str) -> str:
    """A token as it fits in an X-ray cell (hover shows it whole): an end-of-sequence token as ∎, another special
    token (``<pad>``, ``<unk>``: a random model samples them) as ◇, a long token cut.

    >>> cell_text("7"), cell_text("<eos>"), cell_text("<|im_end|>"), cell_text("</s>"), cell_text("<unk>")
    ('7', '∎', '∎', '∎', '◇')
    >>> cell_text("Ġthe"), cell_text("Ġnumber")
    ('Ġthe', 'Ġnu…')
    """
    if len(token) > 2 and token.startswith("<") and token.endswith(">"):
        name = token.strip("<|>/").lower()
        return "∎" if token == "</s>" or name in ("eos", "im_end", "endoftext", "end_of_text", "eot_id") else "◇"
    return token if len(token) <= 4 else token[:3] + "…"


def xray_figure(*, tokens: Sequence[Sequence[str]], adv_ratio, mask, ratio, entropy, kl, weight, low, high,
                row_labels: Sequence[str], title: str = "Token X-ray") -> go.Figure:
    """A group's completions token by token, coloured by A x rho (blue pushed up, red pushed down),
    with clipped tokens marked; hover shows ratio, entropy, KL and the weight on grad logp.
    ``tokens`` are the token strings of each row; the other arrays are (rows, T); ``kl`` may be None.

    Traces: 0 ``A x ratio`` (heatmap, token text in the cells), 1 ``clipped low``, 2 ``clipped high``.
    """
    z = masked(adv_ratio, mask)
    rows, T = z.shape
    text = [[(tokens[i][t] if t < len(tokens[i]) else "") for t in range(T)] for i in range(rows)]
    shown = [[cell_text(s) for s in row] for row in text]
    kl = np.full(z.shape, np.nan) if kl is None else masked(kl, mask)
    custom = np.stack([masked(ratio, mask), masked(entropy, mask), kl, masked(weight, mask)], axis=-1)
    lim = float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else 1.0
    fig = go.Figure(go.Heatmap(
        z=gaps(z), text=shown, hovertext=text, texttemplate="%{text}", textfont=dict(size=14),  # no shrink to fit
        customdata=gaps(custom), name="A x ratio", colorscale="RdBu",
        zmid=0, zmin=-lim, zmax=lim, xgap=2, ygap=2, colorbar=dict(title="A x rho"),
        hovertemplate=("token '%{hovertext}' (t=%{x})<br>A x rho %{z:.3f}<br>ratio %{customdata[0]:.3f}"
                       "<br>entropy %{customdata[1]:.3f}<br>KL %{customdata[2]:.4f}"
                       "<br>weight %{customdata[3]:.3f}<extra>%{y}</extra>")))
    for name, flags, color in (("clipped low", low, COLORS["low"]), ("clipped high", high, COLORS["high"])):
        r, t = np.nonzero(np.asarray(flags, dtype=bool) & (np_(mask) > 0))
        fig.add_scatter(x=t, y=r, name=name, mode="markers", hoverinfo="skip",
                        marker=dict(symbol="square-open", size=22, line_width=3, color=color))
    fig.update_yaxes(autorange="reversed", tickmode="array", tickvals=list(range(rows)), ticktext=list(row_labels),
                     title_text="completion")
    fig.update_xaxes(title_text="token position t   (∎ end of sequence, ◇ other special token)", dtick=1)
    fig.update_layout(title=title, height=120 + 44 * rows, legend=dict(orientation="h", y=-0.25))
    return themed(fig)
