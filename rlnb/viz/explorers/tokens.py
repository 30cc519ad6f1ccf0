"""``TokenXRay``: one group's completions token by token: who is pushed, how hard, and who is clipped."""

from __future__ import annotations

import ipywidgets as widgets
import torch

from rlnb.viz.explorers.base import STYLE, Explorer
from rlnb.viz.explorers.demo import EOS, demo_record
from rlnb.viz.figures.train import xray_figure


def token_strings(batch, row: int, *, tokenizer=None, record=None) -> list[str]:
    """The token strings of completion ``row`` (its valid tokens). Without a tokenizer: the record's
    own ``tokens`` if it has them, else one per character plus EOS when the count fits (the default
    model is character-level), else the token ids."""
    n = int(batch.mask[row].sum())
    ids = batch.completion_ids[row, :n].tolist()
    if tokenizer is not None:
        return [str(t) for t in tokenizer.convert_ids_to_tokens(ids)]
    if record is not None and getattr(record, "tokens", None) is not None:
        return list(record.tokens[row])[:n]
    text = batch.completions[row] if batch.completions is not None else None
    if text is not None and len(text) in (n, n - 1):
        return (list(text) + [EOS])[:n]
    return [str(i) for i in ids]


class TokenXRay(Explorer):
    """A group's completions token by token, coloured by A x rho (the signed push each token gets,
    before clipping), clipped tokens boxed (low orange, high pink), ratio / entropy / KL / weight on
    hover. The ``step`` slider scrubs back through ``trainer.records`` (the last 64 steps) and shows their
    trainer step numbers; the view opens on the newest step's first group with both right and wrong answers.

    Arguments: trainer (optional, positional): its ``records`` and ``tokenizer``. Keyword-only:
    records (a list of ``StepRecord``s instead of a trainer's), tokenizer, step (index into the
    records, -1 = latest), group (default: the first with signal). Default without either: a hand-made record
    (``rlnb.viz.explorers.demo``).
    ``refresh()`` re-reads the trainer's records after more training.

    Controls: ``step`` (the trainer's step number of a kept record), ``group``. Readout values: ``step`` (the trainer's
    step number), ``clipped low``, ``clipped high`` (tokens in this group), ``mean entropy``, ``A_0``.
    Trace layout: ``rlnb.viz.figures.train.xray_figure``.
    """

    title = "Token X-ray"

    def __init__(self, trainer=None, *, records=None, tokenizer=None, step: int = -1, group: int | None = None):
        self.trainer = trainer
        self.tokenizer = tokenizer if tokenizer is not None else getattr(trainer, "tokenizer", None)
        self._records = list(records) if records is not None else None
        recs = self.records()
        step = step % len(recs)
        P = recs[step].batch.P
        group = recs[step].batch.signal_group() if group is None else group  # an all-wrong group shows nothing
        steps = self._steps(recs)
        c = {"step": widgets.IntSlider(value=steps[step], min=steps[0], max=steps[-1], description="step", style=STYLE,
                                       tooltip="Which kept training step (the trainer's step number)"),
             "group": widgets.IntSlider(value=min(group, P - 1), min=0, max=P - 1, description="group", style=STYLE,
                                        tooltip="Which prompt's group of G completions")}
        self._start(c)

    @staticmethod
    def _steps(recs) -> list[int]:
        """The trainer's step number of each kept record (its position + 1 where a record has none)."""
        return [int(r.metrics.get("step", i + 1)) if isinstance(r.metrics, dict) else i + 1 for i, r in enumerate(recs)]

    def _record(self, recs):
        """The kept record of the slider's step (the latest at or before it: kept steps may have gaps)."""
        steps, want = self._steps(recs), self.controls["step"].value
        return recs[max([i for i, s in enumerate(steps) if s <= want] or [0])]

    def records(self) -> list:
        if self._records is not None:
            recs = self._records
        elif self.trainer is not None:
            recs = list(self.trainer.records)
        else:
            recs = [demo_record()]
        if not recs:
            raise ValueError("trainer: expected at least one step in trainer.records (call trainer.step())")
        return recs

    def refresh(self) -> None:
        """Re-read the records, let the slider reach the newest, and jump to it, on its first group with signal
        (a group whose answers are all wrong, or all right, has advantage 0: a blank picture)."""
        recs = self.records()
        steps = self._steps(recs)
        with self.hold():
            w = self.controls["step"]
            w.max = max(steps[-1], w.min)  # widen first: ipywidgets refuses min > max on the way
            w.min, w.max, w.value = steps[0], steps[-1], steps[-1]
            g = self.controls["group"]
            g.max = recs[-1].batch.P - 1
            g.value = recs[-1].batch.signal_group()

    def _figure(self):
        recs = self.records()
        rec = self._record(recs)
        b, st = rec.batch, rec.stats
        G = b.group_size
        g = min(self.controls["group"].value, b.P - 1)
        rows = slice(g * G, (g + 1) * G)
        m = b.mask[rows]                                                     # (G, T)
        ratio = st.ratio[rows] if st.ratio is not None else torch.ones_like(m)
        adv = b.adv[rows]
        adv_tok = adv[:, None].expand_as(m) if adv.dim() == 1 else adv      # (G, T)
        zeros = torch.zeros_like(m, dtype=torch.bool)
        low = st.clipped_low[rows] if st.clipped_low is not None else zeros
        high = st.clipped_high[rows] if st.clipped_high is not None else zeros
        ent = st.token_entropy[rows] if st.token_entropy is not None else torch.full_like(m, float("nan"))
        weight = st.weight[rows] if st.weight is not None else torch.full_like(m, float("nan"))
        kl = st.token_kl[rows] if st.token_kl is not None else None
        tokens = [token_strings(b, i, tokenizer=self.tokenizer, record=rec) for i in range(g * G, (g + 1) * G)]
        valid = m.bool()
        step = rec.metrics.get("step", self.controls["step"].value) if isinstance(rec.metrics, dict) else None
        self.values = {"step": step, "clipped low": int((low & valid).sum()), "clipped high": int((high & valid).sum()),
                       "mean entropy": float(ent[valid].mean()) if valid.any() else float("nan"),
                       "A_0": float(adv_tok[0, 0])}
        r = b.rewards[rows].tolist() if b.rewards is not None else [float("nan")] * G
        labels = [f"o{i} r={r[i]:g} A={float(adv_tok[i, 0]):+.2f}" for i in range(G)]
        return xray_figure(tokens=tokens, adv_ratio=adv_tok * ratio, mask=m, ratio=ratio, entropy=ent, kl=kl,
                           weight=weight, low=low, high=high, row_labels=labels,
                           title=f"Step {step}, group {g}: {b.prompts[g * G]} -> {b.answers[g * G]}")
