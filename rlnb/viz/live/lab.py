"""``Lab``: the training loop's control panel. Play, pause, step, step a stage, rewind; turn knobs while
the model learns.

    lab = Lab(Trainer.tiny())
    lab                    # display it; press Play, move beta
    lab.play(); lab.set("beta", 0.05); lab.pause()   # the same from code

Training runs in a background thread (``rlnb.run.lab_driver`` explains why), so other cells run while it
plays. Knob changes apply at the next step boundary and every step logs ``hp/<knob>``; the curves mark the
step where a knob changed.
"""

from __future__ import annotations

import html
import time

import ipywidgets as widgets

from rlnb import recipes as recipes_mod
from rlnb.algos.resolve import inert_knobs
from rlnb.core.knobs import UNSET
from rlnb.recipe import Recipe
from rlnb.run.lab_driver import LabLoop, measure_kl
from rlnb.viz.explorers.base import STYLE, dropdown, knob_control
from rlnb.viz.explorers.tokens import TokenXRay
from rlnb.viz.hooks import mark_box
from rlnb.viz.live.dashboard import Dashboard
from rlnb.viz.live.scenarios import SCENARIOS, describe

KNOBS = ("num_iterations", "num_mini_batches", "eps_low", "eps_high", "beta", "lr", "temperature", "entropy_coef",
         "num_generations")
MAX_MARKS = 20  # dotted change lines drawn (the latest ones)
BUTTONS = ("Play", "Pause", "Step", "Step stage", "Rewind")


class LabBox(widgets.VBox):
    """The lab's outer box: closing the widget (``widget.close()``) stops the lab's thread first."""

    def close(self):
        lab = getattr(self, "_lab_loop", None)
        if lab is not None and not lab.closed:
            lab.close()
        super().close()


class LabDashboard(Dashboard):
    """The live dashboard with a dotted line at each step where the lab changed a knob, and the latest
    change in its title."""

    def __init__(self, trainer, lab: LabLoop, **kwargs):
        self.lab = lab
        super().__init__(trainer, **kwargs)

    def _figure(self):
        fig = super()._figure()
        changes = self.lab.changes[-MAX_MARKS:]
        if changes:  # one dotted line per change, in every panel, set in one assignment: add_vline per line
            #          and panel re-validates the whole layout each time, so redraws slowed with every change
            panels = [k.removeprefix("xaxis") for k in fig.layout.to_plotly_json() if k.startswith("xaxis")]
            fig.layout.shapes = tuple(fig.layout.shapes) + tuple(
                dict(type="line", x0=c.step - 0.5, x1=c.step - 0.5, xref=f"x{p}", yref=f"y{p} domain", y0=0, y1=1,
                     line=dict(dash="dot", color="#888", width=1)) for c in changes for p in panels)
        if changes:  # the latest change in the title (labels in the plot collide with the panel titles)
            fig.update_layout(title_text=f"{fig.layout.title.text} · last change: {changes[-1]}")
        return fig


def _value(trainer, name: str):
    """What knob ``name`` runs with now; an entry knob no chosen entry takes shows its slider's low end."""
    v = trainer.knob(name)
    if v is UNSET or v is None:
        k = Recipe.knobs()[name]
        v = k.slider[0] if k.kind != "int" else int(k.slider[0])
    return v


class Lab:
    """One widget: buttons, knobs, status line, live dashboard, token X-ray of the latest step, scenarios.

    Arguments: ``trainer``; keyword-only ``knobs`` (the knob names to control, default ``KNOBS``),
    ``backend`` (the dashboard's), ``max_fps`` (redraws per second), ``replace`` (take the trainer over
    from another open Lab, stopping its thread; without it a second Lab on one trainer is refused).

    ``controls``: knob name -> widget (plus ``"recipe"``, a dropdown of ``rlnb.recipes``); moving one calls
    ``set``. ``buttons``: label -> Button. ``status``: the one-line status. ``loop``: the engine.
    """

    def __init__(self, trainer, *, knobs=KNOBS, backend: str | None = None, max_fps: float = 2.0,
                 replace: bool = False):
        bad = [k for k in knobs if k not in Recipe.knobs()]
        if bad:
            raise ValueError(f"knobs: {bad} are not Recipe knobs; known: {sorted(Recipe.knobs())}")
        self.trainer = trainer
        self.loop = LabLoop(trainer, knobs=knobs, replace=replace)
        self._own_reference, self._widget = None, None
        try:
            self._build(trainer, knobs, backend, max_fps)
        except BaseException:
            self.close()  # a lab that could not be built owns nothing: trainer released, reference handed back
            raise

    def _build(self, trainer, knobs, backend, max_fps) -> None:
        self._own_reference = measure_kl(trainer)
        self.dashboard = LabDashboard(trainer, self.loop, backend=backend, max_fps=max_fps)
        self.status = widgets.HTML()
        self.message = widgets.HTML()
        self.stage_view = widgets.HTML()
        self.inert_view = widgets.HTML()  # which controls cannot act now, and why (data-rlnb-inert)
        self.xray, self.xray_box, self._xray_at = None, widgets.VBox([widgets.HTML("<i>Token X-ray: after the "
                                                                                  "first step</i>")]), 0.0
        self._syncing = False
        self.controls = {n: knob_control(n, _value(trainer, n)) for n in knobs}
        self.controls["recipe"] = dropdown("recipe", recipes_mod.names(), trainer.recipe.name
                                           if trainer.recipe.name in recipes_mod.names() else "grpo",
                                           "Switch the whole recipe at the next step boundary (weights kept)")
        for name, w in self.controls.items():
            if hasattr(w, "continuous_update"):
                w.continuous_update = False  # a drag is one change, applied on release (not one per pixel)
            w.observe(lambda ch, name=name: self._on_control(name, ch["new"]), names="value")
        self.buttons = {b: widgets.Button(description=b, layout=widgets.Layout(width="auto")) for b in BUTTONS}
        actions = {"Play": self.play, "Pause": lambda: self.pause(wait=False), "Step": self.step,
                   "Step stage": self.step_stage, "Rewind": self.rewind}
        for b, fn in actions.items():
            self.buttons[b].on_click(lambda _, fn=fn: self._safely(fn))
        self.scenario = widgets.Dropdown(options=list(SCENARIOS), description="scenario", style=STYLE)
        self.buttons["Set up"] = widgets.Button(description="Set up", tooltip="Apply the scenario's knobs")
        self.buttons["Set up"].on_click(lambda _: self._safely(lambda: self.set_up(self.scenario.value)))
        self.scenario_text = widgets.HTML()
        self.scenario.observe(lambda ch: self._show_scenario(), names="value")
        self._show_scenario()
        self.loop.on_step, self.loop.on_change = self._on_step, self._refresh
        self._widget = None
        self._refresh()

    # --- from code ------------------------------------------------------------------------------
    def play(self, steps: int | None = None) -> None:
        """Train in the background until ``pause()`` (or ``steps`` more); returns at once.

        A thread, not the kernel's event loop: a step is about a second of blocking torch work, which on
        the event loop would freeze every widget for that second; in a thread torch releases the GIL, the
        kernel keeps running cells and widget messages, and widget updates from the thread reach
        JupyterLab (the kernel's iopub socket is thread-safe). It works the same in plain Python."""
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

    def rewind(self) -> int:
        """Back to the checkpoint kept when playing last stopped; returns its step."""
        step = self.loop.rewind()
        self.dashboard.draw()
        return step

    def set(self, knob: str, value) -> None:
        """``knob = value`` from the next step on (a bad value raises the knob's error; the run goes on)."""
        if knob == "recipe":
            new = recipes_mod.get(value)
            cur = self.trainer.recipe
            changes = {k: getattr(new, k) for k in Recipe.knobs() if getattr(new, k) != getattr(cur, k)}
            if changes.get("critic", cur.critic) != cur.critic:
                raise ValueError(f"recipe: {value!r} {'trains' if new.critic else 'has no'} critic (a value head) "
                                 f"and this run {'has none' if new.critic else 'has one'}; it cannot switch live. "
                                 f"Build a new Trainer: rlnb.Trainer.tiny({value!r})")
            self.loop.set_many(changes)                     # all of the recipe at one boundary, or none of it
        else:
            self.loop.set(knob, value)
        self._refresh()

    def set_up(self, name: str) -> str:
        """Apply scenario ``name``'s knobs (next step boundary); returns what it says to try."""
        if name not in SCENARIOS:
            raise ValueError(f"name: expected one of the scenarios {sorted(SCENARIOS)}, got {name!r}")
        s = SCENARIOS[name]
        t = self.trainer
        if s.reference and t.ref_model is None:  # KL is measured whenever there is a reference
            if self.loop.state != "paused":
                raise RuntimeError(f"{name}: pause first (this scenario adds the reference model)")
            t.use_reference("start")
        for k, v in s.setup.items():
            self.set(k, v)
        self.scenario.value = name
        return describe(name)

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
        if self._syncing:
            return
        self._safely(lambda: self.set(name, value))
        if self.message.value:  # refused: the control goes back to what runs
            self._sync_controls()

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

    def _sync_controls(self) -> None:
        self._syncing = True
        try:
            for name, w in self.controls.items():
                v = self.trainer.recipe.name if name == "recipe" else _value(self.trainer, name)
                if name != "recipe" and hasattr(w, "max") and not isinstance(w, widgets.FloatLogSlider):
                    w.max, w.min = max(w.max, v), min(w.min, v)
                if name != "recipe" or v in w.options:
                    w.value = v
        finally:
            self._syncing = False

    def _refresh(self) -> None:
        self.status.value = f"<code class='rlnb-readout'>lab: {html.escape(self.loop.status())}</code>"
        if self.loop.error:
            self.message.value = f"<span style='color:#D55E00'>{html.escape(self.loop.error)}</span>"
        if not self.loop.pending:
            self._sync_controls()
        self._show_inert()
        if self.loop.state == "paused":
            self.dashboard.flush()

    def inert(self) -> dict[str, str]:
        """``{knob: why it cannot act}`` for this lab's controls, on the recipe the next step will run (the
        pending changes applied): e.g. the clip ranges while every update is on-policy."""
        recipe = self.trainer.recipe
        try:
            recipe = recipe.replace(**{k: v for k, v in self.loop.pending.items() if k in Recipe.knobs()})
        except (TypeError, ValueError):
            pass  # a pending value the step will refuse: show what runs now
        return {k: why for k, why in inert_knobs(recipe).items() if k in self.controls}

    def _show_inert(self) -> None:
        inert = self.inert()
        for name, w in self.controls.items():
            w.disabled = name in inert
        by_reason: dict[str, list[str]] = {}
        for name, why in inert.items():
            by_reason.setdefault(why, []).append(name)
        lines = [f"<div class='rlnb-inert' data-rlnb-inert='{' '.join(names)}'><b>{', '.join(names)}</b> "
                 f"cannot act: {html.escape(why)}</div>" for why, names in by_reason.items()]
        self.inert_view.value = "<small>" + "".join(lines) + "</small>" if lines else ""

    def _show_scenario(self) -> None:
        self.scenario_text.value = f"<small>{html.escape(describe(self.scenario.value))}</small>"

    # --- display --------------------------------------------------------------------------------
    @property
    def widget(self) -> widgets.VBox:
        if self._widget is None:
            row = lambda ws: widgets.HBox(ws, layout=widgets.Layout(flex_flow="row wrap"))  # noqa: E731
            self._widget = LabBox([
                widgets.HTML("<b>The lab</b>"), self.status,
                row([self.buttons[b] for b in BUTTONS]), self.message,
                row(list(self.controls.values())), self.inert_view,
                row([self.scenario, self.buttons["Set up"]]), self.scenario_text, self.stage_view,
                self.dashboard.widget, self.xray_box])
            self._widget._lab_loop = self.loop
            mark_box(self._widget, self)
        return self._widget

    def _repr_mimebundle_(self, **kwargs):
        self.dashboard.live.refresh_view()  # the view starts from the figure as it is now
        return self.widget._repr_mimebundle_(**kwargs)


def stage_summary(stage: str, batch) -> str:
    """One line about the batch after ``stage``: what that stage wrote."""
    if stage == "sample":
        return f"{batch.B} completions, mean length {float(batch.mask.sum(1).float().mean()):.1f} tokens"
    if stage == "reward":
        return f"mean reward {float(batch.rewards.mean()):.3f}, {int(batch.correct.sum())} of {batch.B} correct"
    if stage == "advantage":
        return f"advantage mean |A| {float(batch.adv.abs().mean()):.3f}"
    return "update applied; the step is committed"
