"""``CreditView``: where a completion's outcome was decided, token by token (Monte-Carlo prefix values).

Also the figures of notebook 09: ``credit_figure`` (a value curve over a heat strip of per-token credit,
one strip per estimate) and ``race_figure`` (the shipped VinePPO vs GRPO race, mean and band over seeds).
"""

from __future__ import annotations

import time

import ipywidgets as widgets
import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from rlnb.credit import mc_token_advantages, prefix_values
from rlnb.viz.controls import STYLE, Explorer
from rlnb.viz.theme import COLORS, recipe_color, themed
from rlnb.viz.tokens import token_strings

K_CHOICES = (1, 2, 4, 8, 16, 32, 64)


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
                             texttemplate="%{text}", name="credit", colorscale="RdBu", zmid=0, zmin=-lim, zmax=lim,
                             xgap=2, ygap=2, colorbar=dict(title="A_t", len=0.45, y=0.2),
                             hovertemplate="token '%{text}' (t=%{x})<br>A_t %{z:+.3f}<extra>%{y}</extra>"),
                  row=2, col=1)
    fig.update_yaxes(title_text="V(s_t), P(right)", range=[-0.05, 1.05], row=1, col=1)
    fig.update_xaxes(title_text="tokens written (boundary after token t)", row=1, col=1)
    fig.update_xaxes(title_text="token position t", dtick=1, row=2, col=1)
    fig.update_xaxes(range=[-1, L], row=1, col=1)                  # boundaries sit between the strip's cells
    fig.update_xaxes(range=[-1, L], row=2, col=1)
    fig.update_yaxes(autorange="reversed", row=2, col=1)
    fig.update_layout(title=title, height=330 + 40 * len(strips), showlegend=False)
    return themed(fig)


class CreditView(Explorer):
    """Pick a completion of a sampled, rewarded ``batch`` and K: its Monte-Carlo prefix values
    (``rlnb.credit.prefix_values``, K continuations per prefix, sampled from ``model``) and the per-token
    credit V(s_{t+1}) - V(s_t), under the uniform advantage the batch carries (GRPO's, when it has ``adv``)
    and any ``strips`` you add (label -> (B, T) per-token advantages, e.g. a critic's).

    Controls: ``row`` (the completion), ``K`` (continuations per prefix). Readout: ``reward``,
    ``V(prompt)``, ``sum of A_t`` (= reward - V(prompt)), ``decisive token`` (largest |A_t|),
    ``continuations`` and ``seconds`` (what this estimate cost). Results are cached per (row, K) and
    drawn from a generator seeded by (``seed``, row, K), so a setting always shows the same estimate.
    """

    title = "Credit per token"

    def __init__(self, model, tokenizer, batch, task, *, row: int = 0, K: int = 8, strips: dict | None = None,
                 seed: int = 0, temperature: float = 1.0, max_new_tokens: int | None = None):
        if batch.completion_ids is None or batch.rewards is None:
            raise ValueError("batch: expected a sampled and rewarded Batch (run the Sampler and the Rewarder)")
        if K not in K_CHOICES:
            raise ValueError(f"K: expected one of {K_CHOICES}, got {K!r}")
        self.model, self.tokenizer, self.batch, self.task = model, tokenizer, batch, task
        self.strips, self.seed = dict(strips or {}), seed
        self.kw = dict(temperature=temperature, max_new_tokens=max_new_tokens)
        self.cache: dict = {}
        c = {"row": widgets.IntSlider(value=row % batch.B, min=0, max=batch.B - 1, description="completion",
                                      style=STYLE, tooltip="Which completion of the batch"),
             "K": widgets.Dropdown(options=list(K_CHOICES), value=K, description="K", style=STYLE,
                                   tooltip="Continuations sampled from every prefix")}
        self._start(c)

    def estimate(self, row: int, K: int) -> dict:
        """``{"values": (T + 1,), "adv": (T,), "sequences", "seconds"}`` for one completion (cached)."""
        if (row, K) not in self.cache:
            g = torch.Generator(device=next(self.model.parameters()).device).manual_seed(self.seed * 1_000_003 + row * 101 + K)
            stats, t0 = {}, time.perf_counter()
            v = prefix_values(self.model, self.tokenizer, self.batch, self.task, K=K, rows=[row], generator=g,
                              stats=stats, **self.kw)
            adv = mc_token_advantages(v, self.batch.mask[row : row + 1])
            self.cache[(row, K)] = {"values": v[0], "adv": adv[0], "sequences": stats["sequences"],
                                    "seconds": time.perf_counter() - t0}
        return self.cache[(row, K)]

    def _figure(self):
        row, K = self.controls["row"].value, self.controls["K"].value
        est, b = self.estimate(row, K), self.batch
        L = int(b.lengths[row])
        tokens = token_strings(b, row, tokenizer=self.tokenizer)
        strips = {}
        if b.adv is not None:
            a = b.adv[row]
            strips["uniform (batch adv)"] = (a.expand(L) if a.dim() == 0 else a[:L]).tolist()
        strips.update({label: t[row, :L].tolist() for label, t in self.strips.items()})
        strips[f"MC per token, K={K}"] = est["adv"][:L].tolist()
        t_star = int(est["adv"][:L].abs().argmax())
        self.values = {"reward": float(b.rewards[row]), "V(prompt)": float(est["values"][0]),
                       "sum of A_t": float(est["adv"][:L].sum()),
                       "decisive token": f"t={t_star} '{tokens[t_star]}' ({float(est['adv'][t_star]):+.2f})",
                       "continuations": est["sequences"], "seconds": round(est["seconds"], 2)}
        title = f"{b.prompts[row]}{b.completions[row]}  (answer {b.answers[row]}, reward {float(b.rewards[row]):g})"
        return credit_figure(tokens, est["values"][: L + 1].tolist(), strips, title=title)


def race_points(result: dict) -> dict:
    """``{arm: {"tokens": (C,), "mean": (C,), "low": (C,), "high": (C,), "seeds": n}}`` from the shipped
    race: checkpoint c of every seed (the first step past c sixths of the budget), averaged over seeds."""
    out = {}
    for arm in result["config"]["arms"]:
        runs = [r for r in result["runs"] if r["arm"] == arm]
        C = min(len(r["points"]) for r in runs)
        tok = np.array([[p["tokens"] for p in r["points"][:C]] for r in runs], dtype=float)  # (seeds, C)
        acc = np.array([[p["greedy"] for p in r["points"][:C]] for r in runs], dtype=float)
        out[arm] = {"tokens": tok.mean(0), "mean": acc.mean(0), "low": acc.min(0), "high": acc.max(0),
                    "seeds": len(runs), "steps": [r["steps"] for r in runs]}
    return out


def race_figure(result: dict, *, title: str = "Finer credit vs uniform credit at equal sampled tokens") -> go.Figure:
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
