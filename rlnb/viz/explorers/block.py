"""``BlockExplorer``: the online logsumexp of chapter 14 on one row of real logits, block by block.

The kernel walks the vocabulary in blocks, carrying a running max ``m``, the rescaled sum
``s = sum exp(z - m)`` and ``t = sum exp(z - m)(z - m)`` for the entropy. The answer must not depend on the
block width; the explorer shows the recursion's state after each block and the final error against the fp64
definition, for the block width, temperature and vocabulary size you pick.
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import plotly.graph_objects as go
import torch

from rlnb.viz.explorers.base import STYLE, Explorer
from rlnb.viz.figures import theme

BLOCKS = (2, 4, 16, 64, 256, 1024, 4096)


def online_lse_trace(z: torch.Tensor, block: int) -> dict:
    """The online recursion over a 1-d fp64 ``z`` in blocks of ``block``: per block the running max and the
    running lse estimate ``m + log s``; at the end ``lse`` and the entropy ``H = log s - t / s``.

    >>> out = online_lse_trace(torch.tensor([1.0, 3.0, 2.0], dtype=torch.float64), 2)
    >>> round(out["lse"], 6) == round(float(torch.logsumexp(torch.tensor([1.0, 3.0, 2.0]), 0)), 6), out["m"]
    (True, [3.0, 3.0])
    """
    if z.dim() != 1 or z.numel() == 0:
        raise ValueError(f"z: expected a non-empty 1-d tensor of logits, got shape {tuple(z.shape)}")
    if not isinstance(block, int) or block < 1:
        raise ValueError(f"block: expected a positive int, got {block!r}")
    m, s, t = -3.0e38, 0.0, 0.0                      # finite start: -inf - -inf would be nan
    ms, lses = [], []
    for start in range(0, z.numel(), block):
        b = z[start:start + block]                                      # (block,)
        m_new = max(m, float(b.max()))
        alpha = math.exp(m - m_new)                                     # rescale what was summed so far
        e = torch.exp(b - m_new)
        et = torch.where(e > 0, e * (b - m_new), torch.zeros_like(e))   # a masked logit adds 0, not 0 * -inf
        t = alpha * (t + (m - m_new) * s) + float(et.sum())
        s = alpha * s + float(e.sum())
        m = m_new
        ms.append(m)
        lses.append(m + math.log(s))
    return {"m": ms, "lse_so_far": lses, "lse": m + math.log(s), "H": math.log(s) - t / s}


class BlockExplorer(Explorer):
    """One row of logits (``row``, 1-d; default: random with spread 3), the recursion of
    ``online_lse_trace`` at the chosen ``block``, ``temperature`` and vocabulary size ``V`` (the first V
    logits of the row). Readout: ``blocks``, ``|lse - fp64|``, ``|H - fp64|``.
    """

    title = "Online logsumexp, block by block"

    def __init__(self, *, row: torch.Tensor | None = None, block: int = 64, temperature: float = 1.0):
        if row is None:
            row = torch.randn(5000, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 3
        if row.dim() != 1 or row.numel() < 2:
            raise ValueError(f"row: expected a 1-d tensor of at least 2 logits, got shape {tuple(row.shape)}")
        if block not in BLOCKS:
            raise ValueError(f"block: expected one of {BLOCKS}, got {block!r}")
        self.row = row.double()
        n = self.row.numel()
        c = {"block": widgets.SelectionSlider(options=list(BLOCKS), value=block, description="block", style=STYLE),
             "temperature": widgets.FloatSlider(value=temperature, min=0.1, max=2.0, step=0.1, description="temperature",
                                                style=STYLE),
             "V": widgets.IntSlider(value=n, min=2, max=n, step=1, description="V", style=STYLE)}
        self._start(c)

    def _figure(self) -> go.Figure:
        c = self.controls
        z = self.row[: c["V"].value] / c["temperature"].value                  # (V,)
        out = online_lse_trace(z, c["block"].value)
        lse64 = float(torch.logsumexp(z, 0))
        p = torch.softmax(z, 0)
        H64 = float(-(p * torch.log_softmax(z, 0)).sum())
        self.values = {"blocks": len(out["m"]), "|lse - fp64|": abs(out["lse"] - lse64), "|H - fp64|": abs(out["H"] - H64)}
        x = list(range(1, len(out["m"]) + 1))
        fig = go.Figure()
        fig.add_scatter(x=x, y=out["m"], name="running max m", mode="lines+markers",
                        line=dict(color=theme.COLORS["ref"]))
        fig.add_scatter(x=x, y=out["lse_so_far"], name="m + log s (lse so far)", mode="lines+markers",
                        line=dict(color=theme.COLORS["pi"]))
        fig.add_hline(y=lse64, line_dash="dash", annotation_text="fp64 logsumexp of the whole row")
        fig.update_layout(title="The recursion's state after each block", xaxis_title="blocks read",
                          yaxis_title="value (logit units, nats)", height=330, legend=dict(orientation="h", y=-0.3))
        return theme.themed(fig)
