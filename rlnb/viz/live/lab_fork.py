"""The lab's fork and rewind from code and from the panel: ``fork``, ``close_fork``, ``compare``, ``rewind(step)``,
the "knobs for" switch (which branch the sliders drive) and the "rewind to" list of kept steps.

Mixed into ``Lab``, which owns ``loop`` (a ``LabLoop``: ``rlnb.run.lab_branches`` does the work), ``trainer``,
``dashboard`` and ``_refresh``.
"""

from __future__ import annotations

import ipywidgets as widgets

from rlnb.run import fork as fork_mod
from rlnb.viz.explorers.base import STYLE
from rlnb.viz.figures.theme import metric_label

COMPARED = ("reward", "accuracy", "entropy", "kl", "clip_ratio/region_mean")  # compare()'s columns
LAST = 5  # compare() averages the last this many steps (one step's batch is noisy)


class LabForks:
    """Fork and rewind for ``Lab``."""

    def _build_fork_controls(self) -> None:
        self.branch = widgets.ToggleButtons(options=["main", "fork"], value="main", description="knobs for",
                                            style=STYLE, disabled=True,
                                            tooltips=["the run you started", "the fork (after Fork)"])
        self.branch.add_class("rlnb-branch")
        self.branch.observe(lambda ch: self._refresh(), names="value")
        self.rewind_to = widgets.Dropdown(description="rewind to", style=STYLE,
                                          layout=widgets.Layout(width="170px"))
        self.rewind_to.add_class("rlnb-rewind-to")
        self.kept_view = widgets.HTML()

    def fork(self, **knobs) -> fork_mod.Branch:
        """Copy the run now (paused) into a second branch with ``knobs`` as its own changes; from now on every
        step steps both, and every panel overlays them. The sliders drive the fork until you switch "knobs for"
        back to main. Memory: ``fork_cost()``; refused (MemoryError) where the copy does not fit."""
        branch = self.loop.fork(**knobs)
        self.branch.disabled, self.branch.value = False, "fork"
        self.dashboard.draw()
        self._refresh()
        return branch

    def _between_steps(self, fn) -> None:
        """A Fork or Close fork press: while playing, pause at the step boundary (at most one step's wait), do
        ``fn``, play on."""
        playing = self.loop.state == "playing"
        if playing:
            self.loop.pause(wait=True)
        try:
            fn()
        finally:
            if playing:
                self.play()

    def close_fork(self):
        """Stop stepping the fork (paused); its curves stay drawn and ``compare()`` still reads it."""
        branch = self.loop.close_fork()
        self.branch.value, self.branch.disabled = "main", True
        self._refresh()
        return branch

    def fork_cost(self) -> int:
        """Bytes one fork holds on this trainer (weights, optimizer and scheduler state)."""
        return fork_mod.cost(self.trainer)

    def compare(self, n: int = 64):
        """A small table: one row per branch (labelled by what differs), the mean of the last ``LAST`` steps since
        the fork of each metric in ``COMPARED`` and held-out greedy pass@1 on ``n`` prompts (evaluated now; paused
        only)."""
        import pandas as pd

        if self.loop.fork_branch is None:
            raise RuntimeError("compare: no fork yet; lab.fork() first")
        rows = {}
        for name, label, hist in zip(("main", "fork"), self.loop.labels(),
                                     (self.trainer.history, self.loop.fork_branch.history)):
            tail = hist[self.loop.fork_branch.since:][-LAST:] or hist[-1:]  # the steps the branches differ in
            row = {"last step": tail[-1]["step"] if tail else 0}
            row |= {metric_label(k): sum(h[k] for h in tail) / len(tail) for k in COMPARED if tail and k in tail[0]}
            row[metric_label("eval/pass@1")] = self.loop.in_branch(name, lambda t: t.evaluate(n)["pass@1"])
            rows[f"{name}: {label}"] = row
        return pd.DataFrame.from_dict(rows, orient="index").round(3)

    def rewind(self, step: int | None = None) -> int:
        """Back to the point kept at ``step`` (None: the newest, or the one picked in "rewind to" when pressed
        on the panel); returns the step. ``lab.loop.kept_text()`` lists the kept steps and their memory."""
        step = self.loop.rewind(step)
        self.dashboard.draw()
        self._refresh()
        return step

    def _rewind_pressed(self) -> None:
        self.rewind(self.rewind_to.value)

    def _show_kept(self) -> None:
        steps = self.loop.kept.steps()
        if list(self.rewind_to.options) != steps:
            pick = self.rewind_to.value if self.rewind_to.value in steps else steps[-1]
            self.rewind_to.options, self.rewind_to.value = steps, pick
        self.kept_view.value = f"<small class='rlnb-kept'>Rewind: {self.loop.kept_text()}</small>"

    def _knobs_branch(self) -> str:
        """Which branch the sliders drive now."""
        b = self.loop.fork_branch
        return "fork" if self.branch.value == "fork" and b is not None and not b.closed else "main"

    def _branch_recipe(self):
        """The recipe the next step of the driven branch runs (its queued changes applied where valid)."""
        if self._knobs_branch() == "fork":
            b = self.loop.fork_branch
            recipe, pending = b.recipe, b.pending
        else:
            recipe, pending = self.trainer.recipe, self.loop.pending
        try:
            return recipe.replace(**{k: v for k, v in pending.items() if k in type(recipe).knobs()})
        except (TypeError, ValueError):
            return recipe  # a pending value the step will refuse: show what runs now
