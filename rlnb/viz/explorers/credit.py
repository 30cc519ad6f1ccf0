"""``CreditView``: where a completion's outcome was decided, token by token (Monte-Carlo prefix values).

Also the figures of notebook 09: ``credit_figure`` (a value curve over a heat strip of per-token credit,
one strip per estimate) and ``race_figure`` (the shipped VinePPO vs GRPO race, mean and band over seeds).
"""

from __future__ import annotations

import time

import ipywidgets as widgets
import torch

from rlnb.stages.credit import mc_token_advantages, prefix_values
from rlnb.viz.explorers.base import STYLE, Explorer
from rlnb.viz.explorers.tokens import token_strings
from rlnb.viz.figures.credit import credit_figure

K_CHOICES = (1, 2, 4, 8, 16, 32, 64)  # continuations per prefix the learner can pick


class CreditView(Explorer):
    """Pick a completion of a sampled, rewarded ``batch`` and K: its Monte-Carlo prefix values
    (``rlnb.stages.credit.prefix_values``, K continuations per prefix, sampled from ``model``) and the per-token
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
