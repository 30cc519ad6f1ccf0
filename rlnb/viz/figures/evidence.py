"""Figures for the evidence chapters (10, 12, 16): the loop as a chain with the trick that acts on each
link, paired differences with their 95 % intervals, ScaleRL's fit with its data and extrapolated region,
and pass@k against k over seeds.

Pure builders: data in, themed plotly figure out, testable without a kernel.
"""

from __future__ import annotations

import plotly.graph_objects as go

from rlnb.viz.figures import theme

STAGES = ("Sampler", "Rewarder", "Advantager", "Updater")


def chain_figure(links: list[dict], *, title: str) -> go.Figure:
    """The loop's four stages as boxes left to right; under each, the changes that act on it (``links``:
    dicts with ``stage`` (one of ``STAGES``), ``change``, ``symptom``; ``color`` optional)."""
    unknown = {ln["stage"] for ln in links} - set(STAGES)
    if unknown:
        raise ValueError(f"links: unknown stages {sorted(unknown)}; stages: {list(STAGES)}")
    fig = go.Figure()
    hover = {"x": [], "y": [], "color": [], "text": []}   # one point per change: what its box says, on hover too
    for i, stage in enumerate(STAGES):
        fig.add_shape(type="rect", x0=i - 0.4, x1=i + 0.4, y0=0.7, y1=1.0, line=dict(color=theme.COLORS["pi"], width=2))
        fig.add_annotation(x=i, y=0.85, text=f"<b>{stage}</b>", showarrow=False, font=dict(size=14))
        if i < len(STAGES) - 1:
            fig.add_annotation(x=i + 0.6, y=0.85, ax=i + 0.4, ay=0.85, xref="x", yref="y", axref="x", ayref="y",
                               text="", showarrow=True, arrowhead=2, arrowwidth=2, arrowcolor=theme.COLORS["ref"])
        mine = [ln for ln in links if ln["stage"] == stage]
        for j, ln in enumerate(mine):
            y = 0.5 - 0.32 * j
            color = ln.get("color", theme.COLORS["accent"])
            fig.add_annotation(x=i, y=0.7, ax=i, ay=y, xref="x", yref="y", axref="x", ayref="y", showarrow=True,
                               arrowhead=0, arrowcolor=color, text=f"<b>{ln['change']}</b><br>treats: {ln['symptom']}",
                               font=dict(size=12, color=color), bgcolor="rgba(127,127,127,0.08)")
            for key, v in zip(hover, (i, y, color, f"{ln['change']} acts on the {stage}: treats {ln['symptom']}"),
                              strict=True):
                hover[key].append(v)
    fig.add_scatter(x=hover["x"], y=hover["y"], mode="markers", name="changes", hovertext=hover["text"],
                    hoverinfo="text", marker=dict(size=8, color=hover["color"]))
    fig.update_xaxes(visible=False, range=[-0.55, len(STAGES) - 0.45])
    fig.update_yaxes(visible=False, range=[-0.05, 1.05])
    fig.update_layout(title=title, height=330, showlegend=False, margin=dict(l=10, r=10, t=50, b=10))
    return theme.themed(fig)


def diff_bars(rows: dict, *, title: str, xaxis: str, yaxis: str, colors: dict | None = None, label: str = "") -> go.Figure:
    """One bar per row: the mean over seeds of a paired difference (``rows``: label -> ``Stat``), with its 95 %
    Student-t interval as error bars and a line at 0. A bar whose interval crosses 0 is not an effect."""
    if not isinstance(rows, dict) or not rows:
        raise ValueError(f"rows: expected a non-empty dict of label -> Stat, got {rows!r}")
    fig = go.Figure()
    for name, st in rows.items():
        lo, hi = st.ci95()
        fig.add_bar(x=[name], y=[st.mean], name=f"{name}{f' ({label})' if label else ''}",
                    marker_color=(colors or {}).get(name) or theme.recipe_color(name),
                    error_y=dict(type="data", symmetric=False, array=[hi - st.mean], arrayminus=[st.mean - lo],
                                 visible=True, thickness=1.5),
                    hovertemplate=f"{name}: mean %{{y:.4f}}, 95 % CI [{lo:.4f}, {hi:.4f}], n = {st.n}<extra></extra>")
    fig.add_hline(y=0, line=dict(color=theme.COLORS["ref"], width=1))
    fig.update_layout(title=title, xaxis_title=xaxis, yaxis_title=yaxis, height=380, showlegend=False)
    return theme.themed(fig)


def fit_figure(data: dict, fits: dict, *, title: str, yaxis: str, xaxis: str = "completions sampled",
               reach: float = 4.0) -> go.Figure:
    """ScaleRL's fit per arm: the data (``data``: arm -> (x, y), all seeds' points), the fit over the compute
    observed (solid), beyond it up to ``reach`` times the last point (dashed, the extrapolated region,
    shaded) and the asymptote A (dotted)."""
    import torch

    fig, last = go.Figure(), max(max(x) for x, _ in data.values())
    for arm, (x, y) in data.items():
        color = theme.recipe_color(arm)
        fig.add_scatter(x=x, y=y, mode="markers", name=f"{arm}: data", marker=dict(color=color, size=5, opacity=0.6),
                        legendgroup=arm)
        f = fits.get(arm)
        if f is None:
            continue
        seen = torch.linspace(max(1.0, min(v for v in x if v > 0)), last, 100, dtype=torch.float64)
        beyond = torch.linspace(last, reach * last, 100, dtype=torch.float64)
        tag = " (extrapolated A)" if f.extrapolated else ""
        fig.add_scatter(x=seen.tolist(), y=f(seen), mode="lines", name=f"{arm}: fit{tag}", line=dict(color=color),
                        legendgroup=arm)
        fig.add_scatter(x=beyond.tolist(), y=f(beyond), mode="lines", name=f"{arm}: beyond the data",
                        line=dict(color=color, dash="dash"), legendgroup=arm, showlegend=False)
        fig.add_hline(y=f.A, line=dict(color=color, dash="dot", width=1))
    fig.add_vrect(x0=last, x1=reach * last, opacity=0.08, line_width=0, annotation_text="extrapolated",
                  annotation_position="top left")
    fig.update_layout(title=title, xaxis_title=xaxis, yaxis_title=yaxis, height=420,
                      legend=dict(orientation="h", y=-0.22))
    return theme.themed(fig)


def passk_figure(curves: dict, *, title: str, yaxis: str = "held-out pass@k (share of prompts)", label: str = "") -> go.Figure:
    """pass@k against k (log scale) per arm: ``curves``: arm -> {k: per-seed values}; mean with min..max
    error bars over seeds."""
    fig = go.Figure()
    for arm, by_k in curves.items():
        ks = sorted(by_k)
        mean = [sum(by_k[k]) / len(by_k[k]) for k in ks]
        lo = [m - min(by_k[k]) for m, k in zip(mean, ks)]
        hi = [max(by_k[k]) - m for m, k in zip(mean, ks)]
        fig.add_scatter(x=ks, y=mean, mode="lines+markers", name=f"{arm}{f' ({label})' if label else ''}",
                        line=dict(color=theme.recipe_color(arm)),
                        error_y=dict(type="data", symmetric=False, array=hi, arrayminus=lo, visible=True, thickness=1))
    fig.update_xaxes(type="log", tickvals=sorted({k for c in curves.values() for k in c}))
    fig.update_layout(title=title, xaxis_title="k (samples per prompt)", yaxis_title=yaxis, height=400,
                      legend=dict(x=1.02, y=1))
    return theme.themed(fig)


def symptom_panels(panels: list[dict], *, title: str) -> go.Figure:
    """One small panel per change: the paired difference (change - control) on *its own* symptom, mean with
    its 95 % t-interval. ``panels``: dicts with ``name``, ``symptom`` (the y axis title, with its unit),
    ``stat`` (a ``Stat`` of per-seed differences) and ``color``."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[p["name"] for p in panels], horizontal_spacing=0.09)
    for i, p in enumerate(panels, start=1):
        st = p["stat"]
        lo, hi = st.ci95()
        fig.add_bar(x=[p["name"]], y=[st.mean], marker_color=p["color"], row=1, col=i, showlegend=False,
                    error_y=dict(type="data", symmetric=False, array=[hi - st.mean], arrayminus=[st.mean - lo],
                                 visible=True, thickness=1.5),
                    hovertemplate=f"mean %{{y:.4f}}, 95 % CI [{lo:.4f}, {hi:.4f}], n = {st.n}<extra></extra>")
        fig.add_hline(y=0, line=dict(color=theme.COLORS["ref"], width=1), row=1, col=i)
        fig.update_yaxes(title_text=p["symptom"], row=1, col=i, title_font=dict(size=11))
        fig.update_xaxes(showticklabels=False, row=1, col=i)
    fig.update_layout(title=title, height=360)
    return theme.themed(fig)


def race_grid(curves: dict, *, reference: str, title: str, yaxis: str, xaxis: str = "completions sampled",
              cols: int = 4, label: str = "") -> go.Figure:
    """The race as small multiples: one panel per arm, its mean over seeds with a min..max band in its recipe
    colour, and ``reference``'s band in grey behind it (``curves``: arm -> {"x": [...], "per_seed": {seed: [...]}},
    as ``StudyResult.curves`` returns)."""
    from plotly.subplots import make_subplots

    arms = [a for a in curves if a != reference]
    rows = -(-len(arms) // cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=arms, shared_xaxes=True, shared_yaxes=True,
                        vertical_spacing=0.08, horizontal_spacing=0.03)

    def band(c, color, name, row, col, show):
        per = list(c["per_seed"].values())
        lo, hi = [min(v) for v in zip(*per)], [max(v) for v in zip(*per)]
        mean = [sum(v) / len(v) for v in zip(*per)]
        fig.add_scatter(x=c["x"] + c["x"][::-1], y=hi + lo[::-1], fill="toself", fillcolor=color, opacity=0.2,
                        line=dict(width=0), hoverinfo="skip", showlegend=False, row=row, col=col)
        fig.add_scatter(x=c["x"], y=mean, mode="lines+markers", line=dict(color=color), marker=dict(size=4),
                        name=name, legendgroup=name, showlegend=show, row=row, col=col)

    for i, arm in enumerate(arms):
        r, c = divmod(i, cols)
        band(curves[reference], theme.COLORS["ref"], f"{reference} (every panel)", r + 1, c + 1, i == 0)
        band(curves[arm], theme.recipe_color(arm), f"{arm}{f' ({label})' if label else ''}", r + 1, c + 1, False)
    for c in range(1, cols + 1):
        fig.update_xaxes(title_text=xaxis, row=rows, col=c, title_font=dict(size=10))
    for r in range(1, rows + 1):
        fig.update_yaxes(title_text=yaxis, row=r, col=1, title_font=dict(size=10))
    fig.update_layout(title=title, height=230 * rows + 90, legend=dict(orientation="h", y=-0.12))
    return theme.themed(fig)
