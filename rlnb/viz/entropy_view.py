"""``EntropyView``: per-token entropy of a batch, entropy over training, and a thermostat's target."""

from __future__ import annotations

import ipywidgets as widgets

from rlnb.viz import compute
from rlnb.viz.controls import STYLE, Explorer
from rlnb.viz.demo import demo_entropy_history, demo_record
from rlnb.viz.figures_train import entropy_figure

THERMOSTAT = {"delta": 1e-3, "coef_max": 0.01}  # toy-sized steps; the paper's 1e-4 / 0.005 are for 7B


class EntropyView(Explorer):
    """Where the policy is unsure (per-token entropy of one batch) and whether it is collapsing (mean
    entropy per step), with the target of an entropy thermostat (``rlnb.algos.EntropyThermostat``)
    and the coefficient it would have used at each step, replayed on the recorded entropies.

    Keyword arguments (all optional):
        trainer: read ``trainer.history`` and the last of ``trainer.records``; ``refresh()`` re-reads.
        record: a ``StepRecord`` for the per-token panel. history: a list of metric dicts with
        ``step`` and ``entropy``. Defaults: hand-made (``rlnb.viz.demo``).
        target: the thermostat's target entropy (nats). thermostat: other ``EntropyThermostat``
        arguments (default ``delta=1e-3, coef_max=0.01``).

    Controls: ``target``. Readout values: ``last entropy``, ``steps below target``, ``last coef``.
    Trace layout: ``rlnb.viz.figures_train.entropy_figure``.
    """

    title = "Entropy view"

    def __init__(self, *, trainer=None, record=None, history: list[dict] | None = None, target: float = 0.3,
                 thermostat: dict | None = None):
        self.trainer, self.thermostat = trainer, {**THERMOSTAT, **(thermostat or {})}
        self._record, self._history = record, history
        c = {"target": widgets.FloatSlider(value=target, min=0.0, max=2.0, step=0.01, description="target",
                                           style=STYLE, readout_format=".2f",
                                           tooltip="Entropy thermostat target (nats): the bonus grows while entropy is below it")}
        self._start(c)

    def refresh(self) -> None:
        """Re-read the trainer's history and latest record (after more training)."""
        self.update()

    def _data(self):
        record, history = self._record, self._history
        if self.trainer is not None:
            history = history if history is not None else self.trainer.history
            if record is None and self.trainer.records:
                record = self.trainer.records[-1]
        if record is None:
            record = demo_record()
        if not history:
            history = demo_entropy_history()
        return record, [h for h in history if h.get("entropy") is not None]

    def _figure(self):
        record, history = self._data()
        target = self.controls["target"].value
        steps, ent = [h["step"] for h in history], [h["entropy"] for h in history]
        coef = compute.thermostat_replay(ent, target=target, **self.thermostat)
        self.values = {"last entropy": ent[-1] if ent else float("nan"),
                       "steps below target": sum(e < target for e in ent), "last coef": coef[-1] if coef else 0.0}
        b, st = record.batch, record.stats
        if st is None or st.token_entropy is None:
            raise ValueError("record: expected UpdateStats with token_entropy")
        labels = [f"o{i} {'right' if ok else 'wrong'}" for i, ok in enumerate(b.correct.tolist())] \
            if b.correct is not None else [f"o{i}" for i in range(b.B)]
        return entropy_figure(token_entropy=st.token_entropy, mask=b.mask, row_labels=labels, steps=steps,
                              entropy=ent, target=target, coef=coef,
                              title=f"Entropy: {self.values['steps below target']} of {len(ent)} steps below "
                                    f"target {target:.2f}")
