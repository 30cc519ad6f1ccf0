"""``AggregationExplorer``: the weight each aggregation gives to short vs long, right vs wrong tokens."""

from __future__ import annotations

import ipywidgets as widgets
import torch

from rlnb.algos import ADVANTAGES, AGGREGATIONS
from rlnb.recipe import Recipe
from rlnb.viz.explorers.base import (
    STYLE,
    Explorer,
    defaults,
    dropdown,
    hyper_controls,
    hyper_kwargs,
    set_hypers,
)
from rlnb.viz.figures import compute
from rlnb.viz.figures.zoo import aggregation_figure

SKIP = ("group_size",)  # filled from the group, not a slider


def _int(name: str, value: int, lo: int, hi: int, tip: str) -> widgets.IntSlider:
    return widgets.IntSlider(value=value, min=lo, max=hi, description=name, tooltip=tip, style=STYLE)


class AggregationExplorer(Explorer):
    """Length bias, exactly: d agg / d loss_{i,t} (by autograd) for every aggregation in
    ``AGGREGATIONS``, per completion, and the total push sum_t weight * A_i each completion gets
    (at ratio 1 a token's loss has weight A_i on grad logp).

    Without a batch the group is hand-made: ``n_right`` of ``G`` completions are right with
    ``len_right`` tokens, the rest wrong with ``len_wrong``; A comes from the ``advantage`` estimator
    on rewards 1 / 0. With ``batch`` (after the Advantager) its mask, ``correct`` and ``adv`` are used
    and the group sliders do nothing.

    Keyword arguments (all optional): aggregation (highlighted), advantage, batch, recipe, G, n_right,
    len_right, len_wrong.

    Controls: ``aggregation``, ``advantage``, ``G``, ``n_right``, ``len_right``, ``len_wrong`` and the
    aggregations' hyperparameters (``max_new_tokens``). Readout values for the selected aggregation:
    ``weight right`` and ``weight wrong`` (per-token weight, mean over those completions),
    ``wrong/right``, and ``push right`` / ``push wrong`` (mean total push).
    Trace layout: ``rlnb.viz.figures.zoo.aggregation_figure``.
    """

    title = "Aggregation explorer (length bias)"

    def __init__(self, *, aggregation: str = "seq-mean-token-mean", advantage: str = "grpo", batch=None,
                 recipe: Recipe | None = None, G: int = 8, n_right: int = 2, len_right: int = 6,
                 len_wrong: int = 24):
        if batch is not None and (batch.adv is None or batch.mask is None):
            raise ValueError("batch: expected a batch after the Advantager (mask and adv set)")
        self.batch, self.recipe = batch, recipe
        c = {
            "aggregation": dropdown("aggregation", AGGREGATIONS.names(), aggregation, "Loss aggregation (AGGREGATIONS)"),
            "advantage": dropdown("advantage", ADVANTAGES.names(), advantage, "Advantage estimator (ADVANTAGES)"),
            "G": _int("G", G, 1, 16, Recipe.field_docs()["num_generations"]),
            "n_right": _int("n_right", n_right, 0, 16, "How many of the G completions are right"),
            "len_right": _int("len_right", len_right, 1, 32, "Tokens in each right completion"),
            "len_wrong": _int("len_wrong", len_wrong, 1, 32, "Tokens in each wrong completion"),
        }
        hyper = hyper_controls([AGGREGATIONS[n] for n in AGGREGATIONS.names()], skip=SKIP, recipe=recipe)
        self._hyper = list(hyper)
        c.update(hyper)
        set_hypers(AGGREGATIONS[aggregation], c, self._hyper, skip=SKIP, recipe=recipe)
        if batch is not None:
            for name in ("G", "n_right", "len_right", "len_wrong"):
                c[name].disabled = True
        self._start(c, handlers={"aggregation": self._on_aggregation})

    def _on_aggregation(self, change) -> None:
        with self.hold():
            set_hypers(AGGREGATIONS[change["new"]], self.controls, self._hyper, skip=SKIP, recipe=self.recipe)

    def _group(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
        """(mask (B, T), right (B,) bool, adv (B,), G) of the batch or of the hand-made group."""
        if self.batch is not None:
            b = self.batch
            keep = b.keep[:, None].double() if b.keep is not None else 1.0
            adv = b.adv if b.adv.dim() == 1 else b.adv.mean(-1)
            right = b.correct if b.correct is not None else b.rewards > 0
            return b.mask.double() * keep, right, adv.double(), b.group_size
        c = self.controls
        G = c["G"].value
        mask, right = compute.group_mask(G=G, n_right=min(c["n_right"].value, G), len_right=c["len_right"].value,
                                         len_wrong=c["len_wrong"].value)
        fn = ADVANTAGES[c["advantage"].value]
        adv = fn(right.double(), G, **defaults(fn, recipe=self.recipe))
        return mask, right, adv.double(), G

    def _figure(self):
        c = self.controls
        mask, right, adv, G = self._group()
        lengths = mask.sum(-1)                                             # (B,)
        per_token, push = {}, {}
        for name in AGGREGATIONS.names():
            fn = AGGREGATIONS[name]
            try:
                w = compute.token_weights(fn, hyper_kwargs(fn, c, skip=SKIP), mask, group_size=G)  # (B, T)
            except ValueError:
                if name == c["aggregation"].value:
                    raise
                w = torch.full_like(mask, float("nan"))                    # this one rejects the setting
            per_token[name] = w.sum(-1) / lengths.clamp(min=1)
            push[name] = w.sum(-1) * adv
        sel = c["aggregation"].value
        mean = lambda x, rows: float(x[rows].mean()) if rows.any() else float("nan")  # noqa: E731
        wr, ww = mean(per_token[sel], right), mean(per_token[sel], ~right)
        self.values = {"weight right": wr, "weight wrong": ww, "wrong/right": ww / wr if wr else float("nan"),
                       "push right": mean(push[sel], right), "push wrong": mean(push[sel], ~right)}
        labels = [f"o{i} {'right' if r else 'wrong'} |o|={int(n)}" for i, (r, n) in enumerate(zip(right.tolist(), lengths.tolist(), strict=True))]
        return aggregation_figure(labels=labels, per_token=per_token, push=push, selected=sel,
                                  title=f"{sel}: per-token weight wrong/right = {self.values['wrong/right']:.3f}")
