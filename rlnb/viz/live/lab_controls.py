"""The lab panel's controls besides the knobs: the "knobs for" switch (which branch the sliders drive), the "rewind
to" list of kept steps and the line saying what rewind can reach (``BranchControls``), and the scenario row
(``ScenarioControls``). Held by ``Lab`` (``rlnb.viz.live.lab_panel``); the work
they start is the engine's (``rlnb.lab``)."""

from __future__ import annotations

import html

import ipywidgets as widgets

from rlnb.viz.explorers.base import STYLE


class BranchControls:
    """Widgets ``branch`` (ToggleButtons), ``rewind_to`` (Dropdown) and ``kept_view`` (HTML) over ``loop`` (a
    ``LabLoop``); ``on_switch()`` is called when "knobs for" changes."""

    def __init__(self, loop, on_switch):
        self.loop = loop
        self.branch = widgets.ToggleButtons(options=["main", "fork"], value="main", description="knobs for",
                                            style=STYLE, disabled=True,
                                            tooltips=["the run you started", "the fork (after Fork)"])
        self.branch.add_class("rlnb-branch")
        self.branch.observe(lambda ch: on_switch(), names="value")
        self.rewind_to = widgets.Dropdown(description="rewind to", style=STYLE, layout=widgets.Layout(width="170px"))
        self.rewind_to.add_class("rlnb-rewind-to")
        self.kept_view = widgets.HTML()

    def forked(self) -> None:
        """A fork was opened: the sliders drive it until "knobs for" goes back to main."""
        self.branch.disabled, self.branch.value = False, "fork"

    def fork_closed(self) -> None:
        self.branch.value, self.branch.disabled = "main", True

    def driven(self) -> str:
        """Which branch the sliders drive now: "fork" while one is open and picked, else "main"."""
        return "fork" if self.branch.value == "fork" and self.loop.forks.is_open() else "main"

    def next_recipe(self):
        """The recipe the next step of the driven branch runs (its queued changes applied where valid)."""
        if self.driven() == "fork":
            b = self.loop.fork_branch
            recipe, pending = b.recipe, b.pending
        else:
            recipe, pending = self.loop.trainer.recipe, self.loop.pending
        try:
            return recipe.replace(**{k: v for k, v in pending.items() if k in type(recipe).knobs()})
        except (TypeError, ValueError):
            return recipe  # a pending value the step will refuse: show what runs now

    def show_kept(self) -> None:
        steps = self.loop.kept.steps()
        if list(self.rewind_to.options) != steps:
            pick = self.rewind_to.value if self.rewind_to.value in steps else steps[-1]
            self.rewind_to.options, self.rewind_to.value = steps, pick
        self.kept_view.value = f"<small class='rlnb-kept'>Rewind: {self.loop.kept_text()}</small>"


class ScenarioControls:
    """The panel's scenario row: ``scenario`` (a Dropdown of ``rlnb.lab.SCENARIOS``), the buttons "Set up" and
    "Fork and fix" (``buttons``, pressed as ``on_set_up(name)`` and ``on_fix(name)``) and ``text``: what the picked
    scenario sets up and what its fix did when measured."""

    def __init__(self, scenarios, describe, *, on_set_up, on_fix):
        self.describe = describe
        self.scenario = widgets.Dropdown(options=list(scenarios), description="scenario", style=STYLE)
        self.buttons = {"Set up": widgets.Button(description="Set up", tooltip="Apply the scenario's knobs"),
                        "Fork and fix": widgets.Button(description="Fork and fix", tooltip="Fork the run and "
                                                       "apply the scenario's fix in the fork")}
        self.buttons["Set up"].on_click(lambda _: on_set_up(self.scenario.value))
        self.buttons["Fork and fix"].on_click(lambda _: on_fix(self.scenario.value))
        self.text = widgets.HTML()
        self.scenario.observe(lambda ch: self.show(), names="value")
        self.show()

    def show(self) -> None:
        self.text.value = f"<small>{html.escape(self.describe(self.scenario.value))}</small>"
