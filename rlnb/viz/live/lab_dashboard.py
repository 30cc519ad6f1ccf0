"""The lab's dashboard: the live curves with a dotted line at each knob change and, while a fork is open, the fork's
curves overlaid (dashed, same colours), the two legend groups titled by what differs ("beta 0.05 from step 30").

One source of truth for what the panel shows: each redraw picks one step (the last step of the history it draws)
and the figure title, the readout above it and the lab's status line (``on_drawn``) are all written from that
step and the change in force there, in the same call; so they never disagree, even while redraws are throttled.
"""

from __future__ import annotations

from rlnb.core.knobs import UNSET
from rlnb.recipe import Recipe
from rlnb.viz.figures.train import dashboard_figure
from rlnb.viz.hooks import values_attr
from rlnb.viz.live.dashboard import Dashboard, hyperparameters_html

MAX_MARKS = 20  # dotted change lines drawn (the latest ones)
LABELLED = 4    # of those, the latest ones named on the plot (more would overlap)
LABEL_LINE = 12  # px between two labels on one line
FORK_MARK = "#CC79A7"  # the fork's change lines: the course palette's reddish purple


def knob_value(recipe, name: str):
    """What knob ``name`` runs with under ``recipe``; an entry knob no chosen entry takes shows its slider's low
    end. (A trainer's controllers may move beta or the entropy coefficient: ``Trainer.knob`` says so.)"""
    for stage in recipe.hyperparameters().values():
        if name in stage:
            v = stage[name]
            break
    else:
        v = getattr(recipe, name)
    if v is UNSET or v is None:
        k = Recipe.knobs()[name]
        v = k.slider[0] if k.kind != "int" else int(k.slider[0])
    return v


def change_text(c) -> str:
    """A knob change as a label on its line: the knob and its new value (``beta 0.05``)."""
    return f"{c.knob} {c.new:g}" if isinstance(c.new, (int, float)) and not isinstance(c.new, bool) else f"{c.knob} {c.new}"


def _label(c, color: str, panel: str, nth: int = 0) -> dict:
    """The line's label in the first panel: an annotation written down along the line from the panel's top, inside
    it (written up from the top, it ran into the panel's title); the ``nth`` label on one line (a change in each
    branch at the fork point) one line further left. ``name`` "rlnb-change" is the hook tests read."""
    return dict(x=c.step - 0.5, xref=f"x{panel}", y=1, yref=f"y{panel} domain", text=change_text(c), textangle=-90,
                xanchor="right", yanchor="top", showarrow=False, font=dict(size=10, color=color), name="rlnb-change",
                xshift=-LABEL_LINE * nth)


def drawn_fork(fork, step: int):
    """The fork the panels draw at ``step``: an open one, or a closed one with steps of its own in view (after a rewind
    to the fork point or before, a closed fork has nothing to show: neither curves nor change lines)."""
    if fork is None or not fork.closed:
        return fork
    return fork if any(fork.since < h["step"] <= step for h in fork.history) else None


class LabDashboard(Dashboard):
    """The live dashboard of a ``LabLoop``: change lines, the fork overlaid, and ``on_drawn(step)`` called with
    the step each redraw shows (``shown_step``)."""

    def __init__(self, trainer, lab, *, on_drawn=lambda step: None, **kwargs):
        self.lab, self.on_drawn, self.shown_step = lab, on_drawn, 0
        super().__init__(trainer, **kwargs)

    def _key(self) -> tuple:
        """What the figure shows besides the curves: a change, a fork, a fork's change or label."""
        fork = self.lab.fork_branch
        return (len(self.lab.changes), id(fork), fork is not None and len(fork.changes), self.lab.labels())

    def flush(self) -> None:
        """Draw now if a step arrived, or a knob, the fork or its label changed since the last redraw."""
        if self._key() != getattr(self, "_drawn_key", None):
            self.draw()
        else:
            super().flush()

    def _marks(self, fig, step: int, fork) -> None:
        """One line per change in force by ``step``, in every panel, set in one assignment: add_vline per line
        and panel re-validates the whole layout each time, so redraws slowed with every change."""
        lines = [(c, "#888") for c in self.lab.changes if c.step <= step + 1][-MAX_MARKS:]
        if fork is not None:
            lines += [(c, FORK_MARK) for c in fork.changes if c.step <= step + 1][-MAX_MARKS:]
        panels = [k.removeprefix("xaxis") for k in fig.layout.to_plotly_json() if k.startswith("xaxis")]
        fig.layout.shapes = tuple(fig.layout.shapes) + tuple(
            dict(type="line", x0=c.step - 0.5, x1=c.step - 0.5, xref=f"x{p}", yref=f"y{p} domain", y0=0, y1=1,
                 line=dict(dash="dot", color=color, width=1)) for c, color in lines for p in panels)
        last = {(color, c.step, c.knob): (c, color) for c, color in lines}  # a knob moved twice at one step: its last
        named = list(last.values())[-LABELLED:]          # the latest changes, named in the first panel
        before = lambda i, c: [d.step for d, _ in named[:i]].count(c.step)  # noqa: E731  (labels on its line so far)
        fig.layout.annotations = tuple(fig.layout.annotations) + tuple(
            _label(c, color, panels[0], before(i, c)) for i, (c, color) in enumerate(named))

    def _figure(self):
        hist = list(self.trainer.history) if self.trainer is not None else []
        step = hist[-1]["step"] if hist else 0
        self.shown_step = step
        last = hist[-1] if hist else {}
        fmt = lambda k: f"{last[k]:.3f}" if isinstance(last.get(k), (int, float)) else "-"  # noqa: E731
        change = self.lab.last_change(step)
        shown = {"step": step, **{k: last[k] for k in ("reward", "accuracy", "entropy") if k in last}}
        self._status_html = (f"<code class='rlnb-readout' {values_attr(shown)}>step {step} · reward {fmt('reward')} · accuracy "
                             f"{fmt('accuracy')} · entropy {fmt('entropy')}</code>")
        self.hparams.value = hyperparameters_html(self.trainer)
        fork = drawn_fork(self.lab.fork_branch, step)
        labels = self.lab.labels() if fork is not None else None
        title = f"Training: step {step}" + (f" · last change: {change}" if change else "")
        fig = dashboard_figure(series=self.series(hist), panels=self.panels, title=title,
                               fork=None if fork is None else self.series([h for h in fork.history
                                                                           if h["step"] <= step]),
                               branches=labels)
        self._marks(fig, step, fork)
        self._drawn_key = self._key()
        self.on_drawn(step)
        return fig


def stage_summary(stage: str, batch) -> str:
    """One line about the batch after ``stage``: what that stage wrote."""
    if stage == "sample":
        return f"{batch.B} completions, mean length {float(batch.mask.sum(1).float().mean()):.1f} tokens"
    if stage == "reward":
        return f"mean reward {float(batch.rewards.mean()):.3f}, {int(batch.correct.sum())} of {batch.B} correct"
    if stage == "advantage":
        return f"advantage mean |A| {float(batch.adv.abs().mean()):.3f}"
    return "update applied; the step is committed"
