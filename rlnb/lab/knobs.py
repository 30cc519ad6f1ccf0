"""Knob changes queued for a step boundary: checked when queued, applied between steps, all or none.

Each branch of a lab (the main run, the fork) has a ``Queue``. ``add`` checks the changes now, with those queued
already, exactly as the recipe and the lab check them (``check_live``), so a bad value raises at once and nothing
is queued; ``apply`` runs between steps in the thread that owns the trainer, and a combination the trainer itself
refuses (``max_new_tokens`` past the model's context) is dropped and returned, the run going on with the knobs it
had.
"""

from __future__ import annotations

import threading

from rlnb.lab.timeline import Change, apply_changes


def check_live(recipe, changes: dict) -> None:
    """Raise what a live change is refused with: a value the recipe refuses (naming the knob), or ``critic``
    (the value head cannot be switched on or off while a run goes on)."""
    if "critic" in changes and changes["critic"] != recipe.critic:
        raise ValueError("critic: cannot switch the value head on or off live (it adds a module to the "
                         "optimizer); build a new Trainer with the recipe instead")
    recipe.replace(**changes)


class Queue:
    """The knob changes queued for one branch's next step boundary (``pending``). The notebook's thread adds,
    the thread that steps the branch applies: a lock keeps the two apart."""

    def __init__(self):
        self.pending: dict = {}
        self._lock = threading.Lock()

    def add(self, recipe, changes: dict) -> None:
        """Queue ``changes`` after checking them with those queued already against ``recipe``; nothing is
        queued when they are refused."""
        with self._lock:
            trial = {**self.pending, **changes}
            check_live(recipe, trial)
            self.pending = trial

    def clear(self) -> None:
        with self._lock:
            self.pending = {}

    def take(self) -> dict:
        with self._lock:
            changes, self.pending = self.pending, {}
        return changes

    def apply(self, trainer, before=None) -> tuple[list[Change], Exception | None]:
        """Apply what is queued to ``trainer`` (between steps only; ``before()`` runs first when there is
        something to apply: the main run keeps a point there). Returns the ``Change`` records and the error the
        trainer refused the changes with (then nothing changed), or None."""
        changes = self.take()
        if not changes:
            return [], None
        if before is not None:
            before()
        try:
            return apply_changes(trainer, changes), None
        except (ValueError, TypeError) as err:
            return [], err
