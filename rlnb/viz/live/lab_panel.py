"""``Lab``: the training loop's control panel. Play, pause, step, step a stage, rewind to a kept step, fork the
run and race the branches; turn knobs while the model learns.

    lab = Lab(Trainer.tiny())
    lab                    # display it; press Play, move beta
    lab.play(); lab.set("beta", 0.05); lab.pause()   # the same from code
    lab.fork(beta=0.0); lab.play(20); lab.wait(); lab.compare()   # the same run without that change, raced

Training runs in a background thread (``rlnb.lab.loop`` explains why), so other cells run while it
plays. Knob changes apply at the next step boundary and every step logs ``hp/<knob>``; the curves mark the
step where a knob changed.
"""

from __future__ import annotations

import html
import time

import ipywidgets as widgets

from rlnb import recipes as recipes_mod
from rlnb.lab import SCENARIOS, LabLoop, describe, measure_kl
from rlnb.lab import fork as fork_mod
from rlnb.recipe import Recipe
from rlnb.viz.explorers.tokens import TokenXRay
from rlnb.viz.figures.theme import metric_label
from rlnb.viz.hooks import mark_box, values_attr
from rlnb.viz.live.lab_controls import BranchControls, ScenarioControls
from rlnb.viz.live.lab_dashboard import LabDashboard, stage_summary
from rlnb.viz.live.lab_knobs import KnobControls

KNOBS = ("num_iterations", "num_mini_batches", "eps_low", "eps_high", "beta", "lr", "temperature", "entropy_coef",
         "num_generations")
BUTTONS = ("Play", "Pause", "Step", "Step stage", "Rewind", "Fork", "Close fork")


class LabBox(widgets.VBox):
    """The lab's outer box: closing the widget (``widget.close()``) stops the lab's thread first."""

    def close(self):
        lab = getattr(self, "_lab_loop", None)
        if lab is not None and not lab.closed:
            lab.close()
        super().close()


class Lab:
    """One widget: buttons, knobs, status line, live dashboard, token X-ray of the latest step, scenarios.

    Arguments: ``trainer``; keyword-only ``knobs`` (the knob names to control, default ``KNOBS``),
    ``metrics`` (the history keys the dashboard draws, default every panel: a chapter shows only what it has
    taught), ``recipes`` (the recipe dropdown's choices, default every recipe), ``scenarios`` (show the
    scenario row, default True), ``backend`` (the dashboard's), ``max_fps`` (redraws per second), ``replace``
    (take the trainer over from another open Lab, stopping its thread; without it a second Lab on one trainer
    is refused).

    ``controls``: knob name -> widget (plus ``"recipe"``, a dropdown of ``rlnb.recipes``); moving one calls
    ``set`` on the branch ``branch`` ("knobs for": main, or the fork once there is one) selects. ``buttons``:
    label -> Button. ``rewind_to``: the kept steps. ``status``: the one-line status. ``loop``: the engine
    (``rlnb.lab.LabLoop``), which does every verb; this panel shows it. ``branch_controls``: "knobs for" and
    "rewind to" (``BranchControls``).
    """

    def __init__(self, trainer, *, knobs=KNOBS, metrics=None, recipes=None, scenarios: bool = True,
                 backend: str | None = None, max_fps: float = 2.0, replace: bool = False):
        bad = [k for k in knobs if k not in Recipe.knobs()]
        if bad:
            raise ValueError(f"knobs: {bad} are not Recipe knobs; known: {sorted(Recipe.knobs())}")
        unknown = [r for r in (recipes or ()) if r not in recipes_mod.names()]
        if unknown or isinstance(recipes, str) or (recipes is not None and not recipes):
            raise ValueError(f"recipes: expected a non-empty list of recipe names from {recipes_mod.names()}, "
                             f"got {recipes!r}")
        self.trainer, self.shows_scenarios = trainer, bool(scenarios)
        self.loop = LabLoop(trainer, knobs=knobs, replace=replace)
        self._own_reference, self._widget = None, None
        try:
            self._build(trainer, knobs, backend, max_fps, metrics, recipes)
        except BaseException:
            self.close()  # a lab that could not be built owns nothing: trainer released, reference handed back
            raise

    def _build(self, trainer, knobs, backend, max_fps, metrics, recipes) -> None:
        self._own_reference = measure_kl(trainer)
        self.status = widgets.HTML()
        self.branch_controls = BranchControls(self.loop, on_switch=self._refresh)
        self.branch, self.rewind_to, self.kept_view = (self.branch_controls.branch, self.branch_controls.rewind_to,
                                                       self.branch_controls.kept_view)
        self.dashboard = LabDashboard(trainer, self.loop, on_drawn=self._show_status, backend=backend,
                                      max_fps=max_fps, metrics=metrics)
        self.message = widgets.HTML()
        self.stage_view = widgets.HTML()
        self.xray, self.xray_box, self._xray_at = None, widgets.VBox([widgets.HTML("<i>Token X-ray: after the "
                                                                                  "first step</i>")]), 0.0
        self.knob_controls = KnobControls(trainer, knobs, self.branch_controls, on_move=self._on_control,
                                          recipes=recipes)
        self.controls, self.inert_view = self.knob_controls.controls, self.knob_controls.view
        self.buttons = {b: widgets.Button(description=b, layout=widgets.Layout(width="auto")) for b in BUTTONS}
        actions = {"Play": self.play, "Pause": lambda: self.pause(wait=False), "Step": self.step,
                   "Step stage": self.step_stage, "Rewind": lambda: self.rewind(self.rewind_to.value),
                   "Fork": lambda: self._between_steps(self.fork),
                   "Close fork": lambda: self._between_steps(self.close_fork)}
        for b, fn in actions.items():
            self.buttons[b].on_click(lambda _, fn=fn: self._safely(fn))
        self.scenario_controls = ScenarioControls(
            SCENARIOS, describe,
            on_set_up=lambda name: self._safely(lambda: self._between_steps(lambda: self.set_up(name))),
            on_fix=lambda name: self._safely(lambda: self._between_steps(lambda: self.try_fix(name))))
        self.scenario, self.scenario_text = self.scenario_controls.scenario, self.scenario_controls.text
        self.buttons.update(self.scenario_controls.buttons)
        for b, w in self.buttons.items():
            w.add_class("rlnb-button-" + b.lower().replace(" ", "-"))   # found by its hook, not its wording
        self.loop.on_step, self.loop.on_change = self._on_step, self._refresh
        self._widget = None
        self._refresh()

    # --- from code ------------------------------------------------------------------------------
    def play(self, steps: int | None = None) -> None:
        """Train in the background until ``pause()`` (or ``steps`` more); returns at once (a thread, not the
        kernel's event loop: ``rlnb.lab.loop`` says why)."""
        self.loop.play(steps)
        self._refresh()

    def pause(self, *, wait: bool = True) -> None:
        """Stop after the step in progress; with ``wait`` (default) return once it has stopped."""
        self.loop.pause(wait=wait)
        self._refresh()

    def wait(self, step: int | None = None, *, timeout: float = 600.0) -> int:
        """Block until the run reaches ``step`` (None: until playing stops); returns the step count."""
        return self.loop.wait(step, timeout=timeout)

    def step(self):
        """Exactly one step (paused only); returns its ``StepRecord``."""
        record = self.loop.step()
        self._refresh()
        return record

    def step_stage(self):
        """The next stage of the current step; returns ``(stage, batch)`` and shows a compact summary."""
        stage, batch = self.loop.step_stage()
        self.stage_view.value = f"<code>after {stage}: {html.escape(stage_summary(stage, batch))}</code>"
        self._refresh()
        return stage, batch

    def set(self, knob: str, value, *, branch: str = "main") -> None:
        """``knob = value`` from the next step on (a bad value raises the knob's error; the run goes on);
        ``branch="fork"``: in the open fork only."""
        if knob == "recipe":
            new = recipes_mod.get(value)
            cur = self.loop.fork_branch.recipe if branch == "fork" and self.loop.fork_branch else self.trainer.recipe
            changes = {k: getattr(new, k) for k in Recipe.knobs() if getattr(new, k) != getattr(cur, k)}
            if changes.get("critic", cur.critic) != cur.critic:
                raise ValueError(f"recipe: {value!r} {'trains' if new.critic else 'has no'} critic (a value head) "
                                 f"and this run {'has none' if new.critic else 'has one'}; it cannot switch live. "
                                 f"Build a new Trainer: rlnb.Trainer.tiny({value!r})")
            self.loop.set_many(changes, branch=branch)      # all of the recipe at one boundary, or none of it
        else:
            self.loop.set_many({knob: value}, branch=branch)
        self._refresh()

    def set_up(self, name: str) -> str:
        """Set scenario ``name`` up (paused only; the Set up button pauses at the step boundary and plays on);
        returns what it says to try."""
        text = self.loop.set_up(name)
        self.scenario.value = name
        self._refresh()
        return text

    def set_many(self, changes: dict, *, branch: str = "main") -> None:
        """Several knobs at one step boundary, all or none (``branch`` as in ``set``)."""
        self.loop.set_many(changes, branch=branch)
        self._refresh()

    def try_fix(self, name: str):
        """Fork the run now (paused) and apply scenario ``name``'s fix in the fork only: the fix then races the
        untreated run from the same point, same seed and prompts. Returns the fork."""
        branch = self.loop.try_fix(name)
        self._forked()
        return branch

    # --- fork and rewind (the engine does them; the panel follows) -----------------------------------
    def fork(self, **knobs):
        """Copy the run now (paused) into a second branch, a trainer of its own, with ``knobs`` as its own changes
        (refused as ``set`` refuses them: then no fork is made); from now on every step steps both, and every panel
        overlays them. The sliders drive the fork until you switch "knobs for"
        back to main. Memory: ``fork_cost()``; refused (MemoryError) where the copy does not fit."""
        branch = self.loop.fork(**knobs)
        self._forked()
        return branch

    def _forked(self) -> None:
        self.branch_controls.forked()
        self.dashboard.draw()
        self._refresh()

    def close_fork(self):
        """Stop stepping the fork (paused); its curves stay drawn and ``compare()`` still reads it."""
        branch = self.loop.close_fork()
        self.branch_controls.fork_closed()
        self._refresh()
        return branch

    def fork_cost(self) -> int:
        """Bytes one fork holds on this trainer (weights, optimizer and scheduler state)."""
        return fork_mod.cost(self.trainer)

    def compare(self, n: int = 64):
        """Both branches side by side (``rlnb.lab.fork.compare``), with the metrics' readable labels."""
        table = fork_mod.compare(self.loop, n)
        return table.rename(columns={k: metric_label(k) for k in table.columns if k != "last step"})

    def rewind(self, step: int | None = None) -> int:
        """Back to the point kept at ``step`` (None: the newest, or the one picked in "rewind to" when pressed
        on the panel); returns the step. ``lab.loop.kept_text()`` lists the kept steps and their memory."""
        step = self.loop.rewind(step)
        self.dashboard.draw()
        self._refresh()
        return step

    def _between_steps(self, fn) -> None:
        """A Fork, Close fork, Set up or Fork and fix press: while playing, pause at the step boundary (at most one
        step's wait), do ``fn``, play on."""
        playing = self.loop.state == "playing"
        if playing:
            self.loop.pause(wait=True)
        try:
            fn()
        finally:
            if playing:
                self.play()

    def close(self) -> None:
        """Stop the background thread and release the trainer (and the reference the lab added, while beta is 0);
        the widget is closed too."""
        self.loop.close()
        if self._own_reference and self.trainer.ref_model is self._own_reference and not self.trainer.recipe.beta:
            self.trainer.use_reference(None)
        self._own_reference = None
        if self._widget is not None:
            self._widget.close()
            self._widget = None

    # --- callbacks ------------------------------------------------------------------------------
    def _safely(self, fn) -> None:
        """A button's action: an error is shown on the panel, not raised into the void."""
        try:
            fn()
            self.message.value = ""
        except (ValueError, TypeError, RuntimeError, KeyError) as err:
            self.message.value = f"<span style='color:#D55E00'>{html.escape(f'{type(err).__name__}: {err}')}</span>"

    def _on_control(self, name: str, value) -> None:
        self._safely(lambda: self.set(name, value, branch=self.branch_controls.driven()))
        if self.message.value:  # refused: the control goes back to what runs
            self.knob_controls.sync()

    def _on_step(self, record) -> None:
        self.dashboard(self.trainer, record)
        now = time.monotonic()
        if now - self._xray_at >= 2.0 or self.loop.state != "playing":
            self._xray_at = now
            if self.xray is None:
                self.xray = TokenXRay(self.trainer)
                self.xray_box.children = [self.xray.widget]
            else:
                self.xray.refresh()
        self._refresh()

    def _show_status(self, step: int) -> None:
        """The status line, about the step the dashboard shows (its title and readout say the same step)."""
        fork = self.loop.fork_branch
        shown = {"step": step, "changes": len(self.loop.changes),
                 **({"fork_since": fork.since} if fork is not None and not fork.closed else {})}
        hook = f"{values_attr(shown)} data-rlnb-state='{html.escape(self.loop.state)}'"  # rlnb.viz.hooks
        self.status.value = f"<code class='rlnb-readout' {hook}>lab: {html.escape(self.loop.status(step))}</code>"

    def _refresh(self) -> None:
        if self.loop.error:
            self.message.value = f"<span style='color:#D55E00'>{html.escape(self.loop.error)}</span>"
        if not (self.loop.pending or self.loop.fork_branch is not None and self.loop.fork_branch.pending):
            self.knob_controls.sync()
        self.knob_controls.show_inert()
        self.branch_controls.show_kept()
        if self.loop.state == "paused":
            self.dashboard.flush()
        self._show_status(self.dashboard.shown_step)

    def inert(self) -> dict[str, str]:
        """``{knob: why it cannot act}`` for this lab's controls, on the recipe the next step will run (the
        pending changes applied): e.g. the clip ranges while every update is on-policy."""
        return self.knob_controls.inert()

    # --- display --------------------------------------------------------------------------------
    @property
    def widget(self) -> widgets.VBox:
        if self._widget is None:
            row = lambda ws: widgets.HBox(ws, layout=widgets.Layout(flex_flow="row wrap"))  # noqa: E731
            self._widget = LabBox([
                widgets.HTML("<b>The lab</b>"), self.status,
                row([self.buttons[b] for b in BUTTONS] + [self.rewind_to]), self.kept_view, self.message,
                self.branch, row(list(self.controls.values())), self.inert_view,
                *([row([self.scenario, self.buttons["Set up"], self.buttons["Fork and fix"]]), self.scenario_text]
                  if self.shows_scenarios else []),
                self.stage_view,
                self.dashboard.widget, self.xray_box])
            self._widget._lab_loop = self.loop
            mark_box(self._widget, self)
        return self._widget

    def _repr_mimebundle_(self, **kwargs):
        self.dashboard.live.refresh_view()  # the view starts from the figure as it is now
        return self.widget._repr_mimebundle_(**kwargs)
