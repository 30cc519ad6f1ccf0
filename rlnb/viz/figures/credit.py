"""Figures of chapter 09: credit per token as heat strips under the prefix-value curve, and the shipped race."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from rlnb.viz.figures.theme import COLORS, recipe_color, themed


def credit_figure(tokens, values, strips: dict, *, title: str = "Credit per token") -> go.Figure:
    """Top: V(s_t) for t = 0..L (the chance of a right answer after t tokens). Bottom: one heat strip per
    estimate in ``strips`` (label -> (L,) advantages), token text in the cells, blue = credit, red = blame.

    Traces: 0 ``V(s_t)`` (line), 1 ``credit`` (heatmap). ``values``: (L + 1,); ``tokens``: L strings.
    """
    L = len(tokens)
    v = np.asarray(values, dtype=float)[: L + 1]
    z = np.array([np.asarray(a, dtype=float)[:L] for a in strips.values()])  # (estimates, L)
    lim = max(float(np.nanmax(np.abs(z))) if z.size else 0.0, 0.05)  # all-zero credit: a readable scale
    fig = make_subplots(rows=2, cols=1, shared_xaxes=False, row_heights=[0.55, 0.45], vertical_spacing=0.3)
    fig.add_scatter(x=np.arange(L + 1) - 0.5, y=v, mode="lines+markers", name="V(s_t)", line=dict(color=COLORS["pi"]),
                    customdata=["(prompt)"] + list(tokens),
                    hovertemplate="after '%{customdata}'<br>V = %{y:.3f}<extra></extra>", row=1, col=1)
    fig.add_trace(go.Heatmap(z=z, x=list(range(L)), y=list(strips), text=[list(tokens)] * len(strips),
                             texttemplate="%{text}", textfont=dict(size=13), name="credit", colorscale="RdBu",
                             zmid=0, zmin=-lim, zmax=lim,
                             xgap=2, ygap=2, colorbar=dict(title="A_t", len=0.45, y=0.2),
                             hovertemplate="token '%{text}' (t=%{x})<br>A_t %{z:+.3f}<extra>%{y}</extra>"),
                  row=2, col=1)
    fig.update_yaxes(title_text="V(s_t), P(right)", range=[-0.05, 1.05], row=1, col=1)
    fig.update_xaxes(title_text="tokens written (boundary after token t)", row=1, col=1)
    fig.update_xaxes(title_text="token position t", dtick=1, row=2, col=1)
    fig.update_xaxes(range=[-1, L], row=1, col=1)                  # boundaries sit between the strip's cells
    fig.update_xaxes(range=[-1, L], row=2, col=1)
    fig.update_yaxes(autorange="reversed", title_text="credit from", row=2, col=1)
    fig.update_layout(title=title, height=330 + 40 * len(strips), showlegend=False)
    return themed(fig)


def race_points(result) -> dict:
    """``{arm: {"tokens": (C,), "mean": (C,), "low": (C,), "high": (C,), "seeds": n, "steps": [...]}}`` from the
    race's ``StudyResult`` (``rlnb.studies.load_result("credit_race")``): evaluation c of every seed (the first step
    past c sixths of the token budget), averaged over seeds; ``steps``: each seed's optimizer steps."""
    out = {}
    for arm in result.arms:
        runs = [r for r in result.runs if r.arm == arm]
        C = min(len(r.evals) for r in runs)
        tok = np.array([[e["tokens"] for e in r.evals[:C]] for r in runs], dtype=float)  # (seeds, C)
        acc = np.array([[e["greedy/pass@1"] for e in r.evals[:C]] for r in runs], dtype=float)
        out[arm] = {"tokens": tok.mean(0), "mean": acc.mean(0), "low": acc.min(0), "high": acc.max(0),
                    "seeds": len(runs), "steps": [r.evals[-1]["step"] for r in runs]}
    return out


def race_figure(result, *, title: str = "Finer credit vs uniform credit at equal sampled tokens") -> go.Figure:
    """Held-out greedy pass@1 against sampled tokens (completions plus Monte-Carlo continuations), mean
    over seeds with a min..max band, one colour per arm."""
    fig = go.Figure()
    for arm, p in race_points(result).items():
        x, color = p["tokens"].tolist(), recipe_color(arm)
        fig.add_scatter(x=x + x[::-1], y=p["high"].tolist() + p["low"].tolist()[::-1], fill="toself", opacity=0.2, mode="lines",
                        line=dict(width=0, color=color), showlegend=False, hoverinfo="skip")
        fig.add_scatter(x=x, y=p["mean"].tolist(), mode="lines+markers", line=dict(color=color),
                        name=f"{arm} (mean, band = min..max of {p['seeds']} seeds)")
    fig.update_layout(title=title, xaxis_title="sampled tokens (completions + MC continuations)",
                      yaxis_title="held-out pass@1 (greedy)", height=380, legend=dict(orientation="h", y=-0.25))
    return themed(fig)
