"""The lab panel's knobs: one control per knob plus the recipe dropdown, kept in step with what runs, and the
line saying which cannot act now and why. Held by ``Lab`` (``rlnb.viz.live.lab_panel``)."""

from __future__ import annotations

import html

import ipywidgets as widgets

from rlnb import recipes as recipes_mod
from rlnb.algos.resolve import inert_knobs
from rlnb.core.knobs import UNSET
from rlnb.viz.explorers.base import dropdown, knob_control
from rlnb.viz.live.lab_dashboard import knob_value


class KnobControls:
    """``controls``: knob name -> widget (plus ``"recipe"``); moving one calls ``on_move(name, value)`` (not while
    the controls are being synced). ``branches`` (a ``BranchControls``) says which branch they show and drive;
    ``view``: the inert line (``data-rlnb-inert`` hooks)."""

    def __init__(self, trainer, knobs, branches, on_move, recipes=None):
        self.trainer, self.branches, self._syncing = trainer, branches, False
        self.view = widgets.HTML()
        self.controls = {n: knob_control(n, self.value(n)) for n in knobs}
        names = list(recipes or recipes_mod.names())  # the dropdown's choices (a chapter lists what it taught)
        self.controls["recipe"] = dropdown("recipe", names, trainer.recipe.name
                                           if trainer.recipe.name in names else names[0],
                                           "Switch the whole recipe at the next step boundary (weights kept)")
        for name, w in self.controls.items():
            if hasattr(w, "continuous_update"):
                w.continuous_update = False  # a drag is one change, applied on release (not one per pixel)
            w.observe(lambda ch, name=name: None if self._syncing else on_move(name, ch["new"]), names="value")

    def value(self, name: str, recipe=None):
        """What ``name`` runs with in the driven branch: the fork's from its recipe, the main run's from the
        trainer (its controllers may move beta or the entropy coefficient)."""
        if recipe is not None and self.branches.driven() == "fork":
            return knob_value(recipe, name)
        v = self.trainer.knob(name)
        return knob_value(self.trainer.recipe, name) if v is None or v is UNSET else v

    def sync(self) -> None:
        """Every control shows what the driven branch's next step runs."""
        self._syncing = True
        recipe = self.branches.next_recipe()
        try:
            for name, w in self.controls.items():
                v = recipe.name if name == "recipe" else self.value(name, recipe)
                if name != "recipe" and hasattr(w, "max") and not isinstance(w, widgets.FloatLogSlider):
                    w.max, w.min = max(w.max, v), min(w.min, v)
                if name != "recipe" or v in w.options:
                    w.value = v
        finally:
            self._syncing = False

    def inert(self) -> dict[str, str]:
        """``{knob: why it cannot act}`` for these controls, on the recipe the next step will run."""
        return {k: why for k, why in inert_knobs(self.branches.next_recipe()).items() if k in self.controls}

    def show_inert(self) -> None:
        inert = self.inert()
        for name, w in self.controls.items():
            w.disabled = name in inert
        by_reason: dict[str, list[str]] = {}
        for name, why in inert.items():
            by_reason.setdefault(why, []).append(name)
        lines = [f"<div class='rlnb-inert' data-rlnb-inert='{' '.join(names)}'><b>{', '.join(names)}</b> "
                 f"cannot act: {html.escape(why)}</div>" for why, names in by_reason.items()]
        self.view.value = "<small>" + "".join(lines) + "</small>" if lines else ""
