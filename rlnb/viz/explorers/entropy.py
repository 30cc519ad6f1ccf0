"""``EntropyView``: per-token entropy of a batch, entropy over training, and a thermostat's target."""

from __future__ import annotations

import ipywidgets as widgets

from rlnb.recipe import Recipe
from rlnb.viz.explorers.base import STYLE, Explorer
from rlnb.viz.explorers.demo import demo_entropy_history, demo_record
from rlnb.viz.figures import compute
from rlnb.viz.figures.train import entropy_figure


def thermostat_args(recipe: Recipe) -> dict:
    """The EntropyThermostat the Trainer builds from a recipe (``rlnb.run.controllers.Thermostat``)."""
    return {"coef": recipe.entropy_coef, "delta": recipe.entropy_coef_delta, "coef_min": 0.0,
            "coef_max": recipe.entropy_coef_max, "gate": False}


class EntropyView(Explorer):
    """Where the policy is unsure (per-token entropy of one batch) and whether it is collapsing (mean
    entropy per step), with the target of an entropy thermostat (``rlnb.algos.EntropyThermostat``)
    and the coefficient it would have used at each step, replayed on the recorded entropies.

    Keyword arguments (all optional):
        trainer: read ``trainer.history`` and the last of ``trainer.records``; ``refresh()`` re-reads.
        record: a ``StepRecord`` for the per-token panel. history: a list of metric dicts with
        ``step`` and ``entropy``. Defaults: hand-made (``rlnb.viz.explorers.demo``).
        recipe: where the thermostat's settings come from (``entropy_coef``, ``entropy_coef_delta``,
        ``entropy_coef_max``, ``entropy_target``), as the Trainer builds it; default the trainer's
        recipe, else ``Recipe()``. target: the starting target (default the recipe's
        ``entropy_target``, else 0.3). thermostat: ``EntropyThermostat`` arguments that override these.

    Controls: ``target``. Readout values: ``last entropy``, ``steps below target``, ``last coef``.
    Trace layout: ``rlnb.viz.figures.train.entropy_figure``.
    """

    title = "Entropy view"

    def __init__(self, *, trainer=None, record=None, history: list[dict] | None = None, recipe: Recipe | None = None,
                 target: float | None = None, thermostat: dict | None = None):
        recipe = recipe or getattr(trainer, "recipe", None) or Recipe()
        if target is None:
            target = recipe.entropy_target if recipe.entropy_target is not None else 0.3
        self.trainer, self.thermostat = trainer, {**thermostat_args(recipe), **(thermostat or {})}
        self._record, self._history = record, history
        c = {"target": widgets.FloatSlider(value=target, min=0.0, max=max(2.0, target), step=0.01,
                                           description="target", style=STYLE, readout_format=".2f",
                                           tooltip=Recipe.field_docs()["entropy_target"])}
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
