"""``Dashboard``: live training curves, as a ``Trainer.run`` callback redrawn a few times a second.

    dash = Dashboard(trainer)
    dash                                   # display it
    trainer.run(100, callbacks=[dash])     # or dash.run(trainer, 100)

Stopping the kernel (the stop button) interrupts ``Trainer.run`` cleanly between steps; the dashboard
then draws the last step it has not drawn yet when the cell ends (or on ``dash.flush()``).
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable, Sequence

import ipywidgets as widgets

from rlnb.viz.backend import LiveFigure, shell
from rlnb.viz.figures.theme import metric_label
from rlnb.viz.figures.train import dashboard_figure
from rlnb.viz.hooks import mark_box, values_attr

EVAL = "eval/pass@1"  # greedy pass@1 on held-out prompts, every ``eval_every`` steps

# (panel title, metrics): TRL's names, as in ``Trainer.history``.
PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("reward and pass@1", ("reward", "accuracy", EVAL)),
    ("entropy", ("entropy",)),
    ("KL to reference", ("kl",)),
    ("clip fraction", ("clip_ratio/low_mean", "clip_ratio/high_mean")),
    ("mean length: right vs wrong", ("completions/mean_length_correct", "completions/mean_length_wrong")),
    ("zero-variance groups", ("frac_reward_zero_std",)),
)


# shown by default when the recipe's sampler is not the trainer on purpose (another temperature, bf16) or it
# corrects for the gap: |log pi_old - log mu| per token, and the rollout IS ratio's range
MISMATCH_PANEL = ("train/rollout mismatch", ("sampling/sampling_logp_difference/mean",
                                             "sampling/importance_sampling_ratio/min"))


def shows_mismatch(recipe) -> bool:
    """Whether a recipe makes the sampler differ from the trainer, or corrects for it (read from its knobs)."""
    return recipe is not None and (getattr(recipe, "rollout_temperature", None) is not None or
                                   bool(getattr(recipe, "rollout_bf16", False)) or
                                   bool(getattr(recipe, "rollout_correction", ())) or
                                   bool(getattr(recipe, "bypass_mode", False)))


def panels_for(metrics: Sequence[str] | None, recipe=None) -> list[tuple[str, tuple[str, ...]]]:
    """The default panels restricted to ``metrics``; a metric in no default panel gets its own. With no
    ``metrics``, the default panels, and the mismatch panel when ``shows_mismatch(recipe)``."""
    if metrics is None:
        return [(t, tuple(m)) for t, m in PANELS] + ([MISMATCH_PANEL] if shows_mismatch(recipe) else [])
    if isinstance(metrics, str) or not metrics:
        raise ValueError(f"metrics: expected a non-empty list of metric names, got {metrics!r}")
    out = [(t, tuple(m for m in ms if m in metrics)) for t, ms in (*PANELS, MISMATCH_PANEL)]
    out = [(t, ms) for t, ms in out if ms]
    known = {m for _, ms in (*PANELS, MISMATCH_PANEL) for m in ms}
    return out + [(metric_label(m), (m,)) for m in metrics if m not in known]


def hyperparameters_html(trainer) -> str:
    """A collapsed "what runs" table: each stage's registry entry and the knobs it runs with
    (``trainer.hyperparameters()``: unset knobs shown as the entry's own defaults)."""
    if not hasattr(trainer, "hyperparameters"):  # anything with a history can be drawn
        return ""
    # <th>, not <b>: a bold head is what marks an explorer's title (the browser test finds boxes by it)
    rows = "".join(f"<tr><th style='text-align:left'>{html.escape(stage)}</th><td><code>"
                   + html.escape(", ".join(f"{k}={v!r}" for k, v in knobs.items())) + "</code></td></tr>"
                   for stage, knobs in trainer.hyperparameters().items())
    return f"<details><summary>what runs (hyperparameters per stage)</summary><table>{rows}</table></details>"


def _target(trainer) -> int | None:
    """The step a running ``Trainer.run`` stops at (None when unknown)."""
    return getattr(trainer, "run_target", None)


class Dashboard:
    """Reward and pass@1, entropy, KL, clip fractions (low/high), mean length of right vs wrong
    completions and the share of zero-variance groups, read from ``trainer.history``.

    Keyword arguments:
        trainer: draw its history now (optional; the callback receives it anyway).
        metrics: history keys to show (default: all of ``PANELS``, and ``MISMATCH_PANEL`` when the trainer's
            recipe samples with a mismatched sampler or corrects for one).
        max_fps: at most this many redraws per second (wall time); the last step of a run is always
            drawn, and a throttled step is drawn when the cell ends or on ``flush()``.
        eval_every: every this many steps, also run ``trainer.evaluate(eval_n)`` (greedy pass@1) and
            plot it as ``eval/pass@1``. 0: never.
        backend: "widget" or "static" (default: ``rlnb.viz.set_backend``'s choice).
        clock: the wall clock (seconds); tests pass a fake one.

    Use the instance (or ``.callback``) as ``cb(trainer, record)``; ``.widget`` or the instance itself
    displays it. ``n_calls``, ``n_draws`` count callbacks and redraws. Trace names: the metric names.
    """

    def __init__(self, trainer=None, *, metrics: Sequence[str] | None = None, max_fps: float = 4.0,
                 eval_every: int = 0, eval_n: int = 64, backend: str | None = None,
                 clock: Callable[[], float] = time.monotonic):
        if not max_fps > 0:
            raise ValueError(f"max_fps: expected a positive number of redraws per second, got {max_fps!r}")
        if not isinstance(eval_every, int) or eval_every < 0:
            raise ValueError(f"eval_every: expected an int >= 0 (0 = never), got {eval_every!r}")
        self.trainer, self.panels = trainer, panels_for(metrics, getattr(trainer, "recipe", None))
        self.min_interval, self.eval_every, self.eval_n, self.clock = 1.0 / max_fps, eval_every, eval_n, clock
        self.evals: list[dict] = []
        self.n_calls = self.n_draws = 0
        self.pending, self._last, self._hooked, self._drawn_steps = False, float("-inf"), False, -1
        self.status, self.hparams = widgets.HTML(), widgets.HTML()
        self._status_html = ""
        # the status line travels with the figure (LiveFigure's caption): both always show the same step
        self.live = LiveFigure(self._figure(), backend=backend, caption=self.status)
        self.status.value = self._status_html
        self.fig = self.live.fig
        self._widget = None

    # --- the callback -------------------------------------------------------------------------------
    def __call__(self, trainer, record=None) -> None:
        self.trainer = trainer
        self.n_calls += 1
        force = False
        if self.eval_every and trainer.step_count % self.eval_every == 0:
            self.evals.append({"step": trainer.step_count, EVAL: trainer.evaluate(self.eval_n)["pass@1"]})
            force = True
        target = _target(trainer)
        force = force or (target is not None and trainer.step_count >= target)
        if force or self.clock() - self._last >= self.min_interval:
            self.draw()
        else:
            self.pending = True
            self._hook()

    @property
    def callback(self) -> Dashboard:
        return self

    def run(self, trainer, steps: int | None = None, **kwargs) -> None:
        """``trainer.run(steps, callbacks=[self, ...])``, then draw whatever is left, even after an error.

        Returns nothing, so that a cell ending with it shows the dashboard, not a wall of history dicts (the
        rows are in ``trainer.history``)."""
        callbacks = [self, *kwargs.pop("callbacks", ())]
        self.trainer = trainer
        self.live.reveal()  # Run All leaves the learner at the last cell: bring the curves that move into view
        try:
            trainer.run(steps, callbacks=callbacks, **kwargs)
        finally:
            self.flush()

    def flush(self) -> None:
        """Draw now if a step arrived since the last complete redraw (also after a redraw that a
        Ctrl-C cut short)."""
        steps = len(self.trainer.history) if self.trainer is not None else 0
        if self.pending or steps != self._drawn_steps:
            self.draw()

    def draw(self) -> None:
        self.pending = True  # until the figure is fully synced: an interrupted redraw is redone by flush()
        self.live.update(self._figure(), caption=self._status_html, now=True)  # throttled above, not again
        self.n_draws += 1
        self._last, self.pending = self.clock(), False
        self._drawn_steps = len(self.trainer.history) if self.trainer is not None else 0
        self._unhook()

    # --- building the figure ------------------------------------------------------------------------
    def series(self, history: list[dict] | None = None) -> dict:
        """metric -> (steps, values) from ``history`` (default: the trainer's) and the evaluations."""
        hist = list(history) if history is not None else list(self.trainer.history) if self.trainer is not None else []
        out = {}
        for _, names in self.panels:
            for m in names:
                rows = self.evals if m == EVAL else hist
                rows = [h for h in rows if m in h]
                out[m] = ([h["step"] for h in rows], [h[m] for h in rows])
        return out

    def _figure(self):
        hist = self.trainer.history if self.trainer is not None else []
        last = hist[-1] if hist else {}
        fmt = lambda k: f"{last[k]:.3f}" if isinstance(last.get(k), (int, float)) else "-"  # noqa: E731
        shown = {"step": last.get("step", 0), **{k: last[k] for k in ("reward", "accuracy", "entropy") if k in last}}
        self._status_html = (f"<code class='rlnb-readout' {values_attr(shown)}>step {shown['step']} · "
                             f"reward {fmt('reward')} · accuracy {fmt('accuracy')} · entropy {fmt('entropy')}</code>")
        self.hparams.value = hyperparameters_html(self.trainer)
        return dashboard_figure(series=self.series(), panels=self.panels,
                                title=f"Training: {len(hist)} steps")

    # --- display and the end-of-cell redraw ---------------------------------------------------------
    @property
    def widget(self) -> widgets.VBox:
        if self._widget is None:
            self._widget = widgets.VBox([self.status, self.hparams, self.live.view])
            mark_box(self._widget, self)
        return self._widget

    def _repr_mimebundle_(self, **kwargs):
        self.live.refresh_view()  # the view starts from the figure as it is now
        return self.widget._repr_mimebundle_(**kwargs)

    def _post_run_cell(self, *args) -> None:
        self.flush()

    def _hook(self) -> None:
        """Draw the throttled last step when the cell ends (also after an interrupt)."""
        ip = shell()
        if ip is not None and not self._hooked:
            ip.events.register("post_run_cell", self._post_run_cell)
            self._hooked = True

    def _unhook(self) -> None:
        ip = shell()
        if ip is not None and self._hooked:
            ip.events.unregister("post_run_cell", self._post_run_cell)
        self._hooked = False
