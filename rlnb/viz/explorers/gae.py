"""``GAEExplorer``: gamma and lambda on a real batch with its critic's values -> per-token advantages, and
GAE's bias/variance trade-off against Monte-Carlo advantages."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from rlnb.algos import gae
from rlnb.notebook.critic import gae_tradeoff, masked_rmse, masked_std, outcome_token_rewards
from rlnb.viz.explorers.base import Explorer, knob_control
from rlnb.viz.figures.theme import COLORS, themed
from rlnb.viz.figures.train import cell_text

LAMS = [i / 20 for i in range(21)]  # the lambda grid of the trade-off panel
LABEL_GAP = 10                      # px between a row's label and its strip


def gae_figure(*, adv, mask, labels: Sequence[str], lams, spread, error=None, lam: float, gamma: float,
               tokens: Sequence[Sequence[str]] | None = None) -> go.Figure:
    """Two panels: per-token advantages as one heat strip per completion (padding blank, 0 white), and the
    spread of the advantages (and their error against Monte-Carlo advantages, when given) over lambda.

    Traces: 0 ``advantages`` (heatmap), 1 ``spread``, 2 ``error`` (empty without a target), 3 ``this lambda``.
    """
    a = np.where(np.asarray(mask, dtype=bool), np.asarray(adv, dtype=float), np.nan)      # (R, T)
    lim = float(np.nanmax(np.abs(a))) if np.isfinite(a).any() else 1.0
    fig = make_subplots(rows=1, cols=2, column_widths=[0.62, 0.38], horizontal_spacing=0.28, subplot_titles=(
        f"per-token advantage A_t (γ = {gamma:.2f}, λ = {lam:.2f})", "bias / variance over λ"))
    text = None if tokens is None else [[cell_text(x) for x in t] + [""] * (a.shape[1] - len(t)) for t in tokens]
    z = [[None if np.isnan(x) else float(x) for x in row] for row in a]  # None, not NaN: widget messages are JSON
    fig.add_heatmap(z=z, x=list(range(a.shape[1])), y=list(labels), name="advantages", colorscale="RdBu",
                    zmid=0, zmin=-lim or -1, zmax=lim or 1, text=text, texttemplate="%{text}" if text else None,
                    textfont=dict(size=12),
                    hovertemplate="token %{x}: A = %{z:.3f}<extra>%{y}</extra>",
                    colorbar=dict(title=dict(text="A_t", side="right"), x=0.47, len=0.9, thickness=12), row=1, col=1)  # clear of panel 2's axis
    fig.add_scatter(x=list(lams), y=list(spread), name="spread (std of A_t)", mode="lines",
                    line=dict(color=COLORS["pi"]), row=1, col=2)
    fig.add_scatter(x=list(lams) if error is not None else [], y=list(error) if error is not None else [],
                    name="error (RMSE vs Monte Carlo)", mode="lines", line=dict(color=COLORS["wrong"]), row=1, col=2)
    here = [spread[int(np.argmin(np.abs(np.asarray(lams) - lam)))]]
    fig.add_scatter(x=[lam], y=here, name="this λ", mode="markers", marker=dict(size=11, color=COLORS["pi"]),
                    row=1, col=2)
    # labels clear of the strips (plotly sets them 2 px off, against the first token) and the margin made to fit them
    fig.update_yaxes(autorange="reversed", title_text="completion", ticklabelstandoff=LABEL_GAP, automargin=True,
                     row=1, col=1)
    fig.update_xaxes(title_text="token position", row=1, col=1)
    fig.update_xaxes(title_text="λ", range=[-0.02, 1.02], row=1, col=2)
    fig.update_yaxes(title_text="reward units", rangemode="tozero", row=1, col=2)
    fig.update_layout(title="GAE on a real batch", height=190 + 30 * max(5, a.shape[0]),
                      legend=dict(orientation="h", y=-0.32, x=0), margin=dict(b=110))  # legend under the axis titles
    return themed(fig)


class GAEExplorer(Explorer):
    """Move gamma and lambda; see each completion's per-token GAE advantages and where this lambda sits on
    the bias/variance curve.

    Keyword arguments:
        values: (B, T) the critic's values V(s_t) (``batch.old_values`` or ``rlnb.notebook.critic.current_values``).
        batch: a sampled ``Batch``: its ``mask``, ``rewards`` (unless ``rewards`` is given) and completions
        (the row labels); or give ``mask`` and ``rewards`` directly.
        target: (B, T) Monte-Carlo per-token advantages (``rlnb.stages.credit.mc_token_advantages``); without it
        only the spread is drawn.
        rows: which rows to show (default the first 8). gamma, lam: starting values.

    Advantages are not whitened (reward units). Readout: ``spread`` (std of A_t over the shown rows' tokens),
    ``error`` (RMSE against ``target``), ``A_0`` (first token of the first shown row).
    """

    title = "GAE explorer"

    def __init__(self, *, values: torch.Tensor, batch=None, mask=None, rewards=None, target=None, rows=None,
                 gamma: float = 1.0, lam: float = 1.0, tokenizer=None):
        mask = batch.mask if mask is None and batch is not None else mask
        rewards = batch.rewards if rewards is None and batch is not None else rewards
        if mask is None or rewards is None:
            raise ValueError("batch: expected a Batch, or both mask and rewards")
        B = mask.shape[0]
        rows = list(range(min(B, 8))) if rows is None else [int(r) for r in rows]
        if not rows or min(rows) < 0 or max(rows) >= B:
            raise ValueError(f"rows: expected row indices in 0..{B - 1}, got {rows!r}")
        for name, x in (("values", values), ("target", target)):
            if x is not None and tuple(x.shape) != tuple(mask.shape):
                raise ValueError(f"{name}: expected shape {tuple(mask.shape)} like the batch's mask, got {tuple(x.shape)}")
        idx = torch.tensor(rows)
        self.mask = mask[idx].float()                                                     # (R, T)
        self.token_rewards = outcome_token_rewards(torch.as_tensor(rewards, dtype=torch.float32)[idx], self.mask)
        self.v = values[idx].float() * self.mask                                          # (R, T)
        self.target = None if target is None else target[idx].float()
        r = self.token_rewards.sum(-1)
        texts = batch.completions if batch is not None and batch.completions else None
        self.labels = [f"{i}: r={float(r[j]):g}" + (f" {texts[i][:14]!r}" if texts else "") for j, i in enumerate(rows)]
        self.tokens = None
        if tokenizer is not None and batch is not None:
            self.tokens = [[tokenizer.decode([t]) for t in batch.completion_ids[i][: int(self.mask[j].sum())].tolist()]
                           for j, i in enumerate(rows)]
        self._start({"gamma": knob_control("gamma", gamma), "lam": knob_control("lam", lam)})

    def advantages(self) -> torch.Tensor:
        """(R, T) GAE advantages of the shown rows at the current gamma and lambda (not whitened)."""
        adv, _ = gae(self.token_rewards, self.v, self.mask, gamma=self.controls["gamma"].value,
                     lam=self.controls["lam"].value, whiten_advantages=False)
        return adv

    def _figure(self):
        gamma, lam = self.controls["gamma"].value, self.controls["lam"].value
        adv = self.advantages()
        target = self.target if self.target is not None else torch.zeros_like(adv)
        curve = gae_tradeoff(self.token_rewards, self.v, self.mask, target, gamma=gamma, lams=LAMS)
        self.values = {"spread": masked_std(adv, self.mask)}
        if self.target is not None:
            self.values["error"] = masked_rmse(adv, self.target, self.mask)
        self.values["A_0"] = float(adv[0, 0])
        return gae_figure(adv=adv, mask=self.mask, labels=self.labels, lams=LAMS, spread=curve["spread"],
                          error=curve["error"] if self.target is not None else None, lam=lam, gamma=gamma,
                          tokens=self.tokens)
