"""``ClipExplorer``: what a policy loss does to the objective and the gradient as the ratio moves."""

from __future__ import annotations

import ipywidgets as widgets
import torch

from rlnb.algos import POLICY_LOSSES
from rlnb.recipe import Recipe
from rlnb.viz.explorers.base import STYLE, Explorer, dropdown, hyper_controls, hyper_kwargs, set_hypers
from rlnb.viz.explorers.demo import demo_record
from rlnb.viz.figures import compute
from rlnb.viz.figures.zoo import clip_figure


class ClipExplorer(Explorer):
    """Surrogate objective and gradient weight vs the ratio rho for A > 0 and A < 0, with the loss's
    hyperparameters on sliders; below, the real ratios of a batch and how many tokens these settings
    clip low and high.

    Every loss in ``POLICY_LOSSES`` that needs no extra tensors is in the dropdown. The grid evaluates
    ``loss(logp=log(mu rho), old_logp=log(mu), adv=+-A, mask=1)``; ``mu`` (the token's probability at
    rollout) matters only to losses that look at probabilities (DPPO), not at the ratio alone.

    Keyword arguments (all optional):
        loss: a key of ``POLICY_LOSSES``. recipe: a ``Recipe`` whose fields set the hyperparameters.
        batch, stats: a ``StepRecord``'s batch and ``UpdateStats`` (their ``ratio``); default: a
        hand-made batch (``rlnb.viz.explorers.demo``). A: the advantage magnitude. mu: old token probability.
        rho_max, n_grid: the ratio grid (0, rho_max].

    Controls: ``loss``, ``A``, ``mu`` and every loss's hyperparameters (``eps_low``, ``eps_high``,
    ``dual_clip_c`` with ``dual_clip_c_on``, ``cispo_cap`` with ``cispo_cap_on``, ``dppo_delta``,
    ``dppo_cap``, ``tau_pos``, ``tau_neg``; only the current loss's are shown).
    Readout values: ``clip_ratio/low_mean``, ``clip_ratio/high_mean`` (share of the batch's tokens in
    the loss that these settings clip) and ``tokens``. Trace layout: ``rlnb.viz.figures.zoo.clip_figure``.
    """

    title = "Clip explorer"

    def __init__(self, *, loss: str = "ppo_clip", batch=None, stats=None, recipe: Recipe | None = None,
                 A: float = 1.0, mu: float = 0.3, rho_max: float = 3.0, n_grid: int = 300):
        if batch is None:
            demo = demo_record()
            batch, stats = demo.batch, demo.stats
        if batch.adv is None or batch.old_logp is None or batch.mask is None:
            raise ValueError("batch: expected a batch after the Advantager (mask, old_logp and adv set)")
        self.batch, self.stats, self.recipe = batch, stats, recipe
        self.rho = torch.linspace(rho_max / n_grid, rho_max, n_grid, dtype=torch.float64)  # (N,)
        names = compute.plain_losses()
        c = {
            "loss": dropdown("loss", names, loss, "Per-token policy loss (POLICY_LOSSES)"),
            "A": widgets.FloatSlider(value=A, min=0.1, max=3, step=0.05, description="A", style=STYLE,
                                     tooltip="Advantage magnitude |A|: left panels use +A, right panels -A"),
            "mu": widgets.FloatSlider(value=mu, min=0.01, max=1.0, step=0.01, description="mu", style=STYLE,
                                      tooltip="pi_old of the token at rollout (DPPO tests p - mu)"),
        }
        hyper = hyper_controls([POLICY_LOSSES[n] for n in names], recipe=recipe)
        self._hyper = list(hyper)
        c.update(hyper)
        set_hypers(POLICY_LOSSES[loss], c, self._hyper, recipe=recipe)
        self._start(c, handlers={"loss": self._on_loss})

    def _on_loss(self, change) -> None:
        with self.hold():
            set_hypers(POLICY_LOSSES[change["new"]], self.controls, self._hyper, recipe=self.recipe)

    def _figure(self):
        c = self.controls
        name = c["loss"].value
        fn = POLICY_LOSSES[name]
        hyper = hyper_kwargs(fn, c)
        curves = compute.clip_curves(fn, hyper, rho=self.rho, mu=c["mu"].value, A=c["A"].value)
        toks = compute.batch_tokens(fn, hyper, self.batch, self.stats)
        n = max(len(toks["ratio"]), 1)
        self.values = {"clip_ratio/low_mean": float(toks["low"].sum()) / n,
                       "clip_ratio/high_mean": float(toks["high"].sum()) / n, "tokens": len(toks["ratio"])}
        args = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in hyper.items())
        return clip_figure(rho=self.rho, tokens=toks, title=f"{name}({args})", **curves)
