"""``KLExplorer``: the KL estimators' values, bias and variance on two distributions you shape."""

from __future__ import annotations

import ipywidgets as widgets
import torch

from rlnb.algos import KL_ESTIMATORS
from rlnb.recipe import Recipe
from rlnb.viz.explorers.base import STYLE, Explorer, dropdown
from rlnb.viz.figures import compute
from rlnb.viz.figures.zoo import kl_figure

D_GRID = torch.linspace(-2.0, 2.0, 161, dtype=torch.float64)  # log-ratios d = logp - ref_logp
COMPARE = ("k1", "k2", "k3")  # drawn by default: all seven, in two panels, made a legend of 20 entries


def _slider(name: str, value: float, lo: float, hi: float, tip: str) -> widgets.FloatSlider:
    return widgets.FloatSlider(value=value, min=lo, max=hi, step=0.05, description=name, tooltip=tip, style=STYLE)


class KLExplorer(Explorer):
    """pi = N(pi_mean, pi_std^2) and pi_ref = N(ref_mean, ref_std^2): sample x ~ pi, evaluate every
    estimator of ``KL_ESTIMATORS`` on (log pi(x), log pi_ref(x)) and compare its mean (bias) and spread
    (std) with the exact KL(pi || pi_ref). The last panel puts beta times the KL term's weight on
    grad logp (by autograd, so straight-through estimators show their true gradient) next to the policy
    term's weight +-A.

    Keyword arguments (all optional): estimator (highlighted), pi and ref as (mean, std), beta, A,
    n_samples, seed; compare: the estimators drawn besides it (default ``COMPARE``, the three of Schulman's note;
    the ``compare`` control adds the others).

    Controls: ``estimator``, ``pi_mean``, ``pi_std``, ``ref_mean``, ``ref_std``, ``beta``, ``A``, ``compare``.
    Readout values: ``KL`` (exact), ``mean``, ``bias``, ``std`` of the selected estimator's per-sample
    values, ``beta*KL``. Trace layout: ``rlnb.viz.figures.zoo.kl_figure``.
    """

    title = "KL explorer"

    def __init__(self, *, estimator: str = "k3", pi: tuple[float, float] = (0.5, 1.0),
                 ref: tuple[float, float] = (0.0, 1.0), beta: float = 0.04, A: float = 1.0,
                 n_samples: int = 4000, seed: int = 0, compare=None):
        self.n_samples, self.seed = n_samples, seed
        compare, names = tuple(COMPARE if compare is None else compare), KL_ESTIMATORS.names()
        if isinstance(compare, str) or not set(compare) <= set(names):
            raise ValueError(f"compare: expected estimator names among {names}, got {compare!r}")
        c = {
            "estimator": dropdown("estimator", KL_ESTIMATORS.names(), estimator, "KL estimator (KL_ESTIMATORS)"),
            "pi_mean": _slider("pi_mean", pi[0], -3, 3, "Mean of the policy pi"),
            "pi_std": _slider("pi_std", pi[1], 0.2, 3, "Std of the policy pi"),
            "ref_mean": _slider("ref_mean", ref[0], -3, 3, "Mean of the reference pi_ref"),
            "ref_std": _slider("ref_std", ref[1], 0.2, 3, "Std of the reference pi_ref"),
            "beta": widgets.FloatSlider(value=beta, min=0, max=1, step=0.01, description="beta", style=STYLE,
                                        tooltip=Recipe.field_docs()["beta"]),
            "A": _slider("A", A, 0.05, 3, "Advantage magnitude |A| of the policy term"),
            "compare": widgets.SelectMultiple(options=names, value=compare, rows=min(len(names), 6), description="compare",
                                              style=STYLE, tooltip="Estimators drawn besides the chosen one "
                                              "(Ctrl or Cmd-click to add one)"),
        }
        self._start(c)

    def _figure(self):
        c = self.controls
        pi, ref = (c["pi_mean"].value, c["pi_std"].value), (c["ref_mean"].value, c["ref_std"].value)
        true = compute.gaussian_kl(*pi, *ref)
        names = list(dict.fromkeys((c["estimator"].value, *c["compare"].value)))     # the chosen one first
        samples = {n: compute.kl_samples(KL_ESTIMATORS[n], pi=pi, ref=ref, n=self.n_samples, seed=self.seed)
                   for n in names}
        weights = {n: compute.kl_weight(KL_ESTIMATORS[n], D_GRID) for n in names}
        lo = min(pi[0] - 4 * pi[1], ref[0] - 4 * ref[1])
        hi = max(pi[0] + 4 * pi[1], ref[0] + 4 * ref[1])
        x = torch.linspace(lo, hi, 200, dtype=torch.float64)
        sel, beta = c["estimator"].value, c["beta"].value
        k = samples[sel]
        self.values = {"KL": true, "mean": float(k.mean()), "bias": float(k.mean()) - true, "std": float(k.std()),
                       "beta*KL": beta * true}
        return kl_figure(x=x, pi_pdf=compute.gaussian_logpdf(x, *pi).exp(),
                         ref_pdf=compute.gaussian_logpdf(x, *ref).exp(), samples=samples, true_kl=true,
                         d=D_GRID, weights=weights, beta=beta, A=c["A"].value, selected=sel,
                         title=f"KL(pi || pi_ref) = {true:.4f} (exact); {sel}: mean {k.mean():.4f}, "
                               f"std {k.std():.4f}; {len(k)} samples")
