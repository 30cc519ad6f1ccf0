"""``LabLoop``: the lab's engine without any widget: play / pause / step / step a stage / rewind / fork.

Training runs in one background thread (``rlnb.lab.player`` says why a thread). Knob changes are queued and
applied between steps, never inside one (``Trainer.reconfigure``), so a step always runs with one set of knobs, and
``history[i]["hp/<knob>"]`` says which. The loop is made of parts it holds: a ``Player`` (the thread), a ``Queue``
of knob changes, a ``Timeline`` (kept points, changes, rewind), ``Forks`` (the second branch, in a trainer of its
own), a ``StagedStep`` while a step is half-run, and the ``SCENARIOS`` it can set up; the trainer's owner is
recorded in ``rlnb.run.owner``.
"""

from __future__ import annotations

from rlnb.lab import points
from rlnb.lab.fork import Branch, Forks
from rlnb.lab.knobs import Queue, check_live
from rlnb.lab.player import Player
from rlnb.lab.scenarios import SCENARIOS, describe
from rlnb.lab.staged import StagedStep
from rlnb.lab.status import StepTimes, line
from rlnb.lab.timeline import Timeline
from rlnb.run import owner

STATES = ("paused", "playing", "stepping")  # ``state``; a half-run step_stage() step shows as "stage X done"


class LabLoop:
    """Drives ``trainer`` one step (or one stage) at a time, in a background thread when playing.

    ``play()`` returns at once; ``pause(wait=True)`` returns once the step in progress has committed
    (at most one more step runs); ``step()`` runs exactly one step in the caller's thread; ``step_stage()``
    runs the next stage and returns ``(stage, batch)``; ``rewind(step)`` goes back to any kept point (``kept``:
    when the lab was made, every ``keep_every`` steps, before each knob change and each time playing stops; at most
    ``keep_limit``, bit-exact: the same knobs give the same steps); ``keep()`` keeps one now; ``fork()`` starts a
    second branch. ``set(knob, value)`` validates at once (a bad value raises the knob's own error and nothing
    changes) and applies at the next step boundary. ``on_step(record)`` and ``on_change()`` are hooks the panel fills.
    """

    def __init__(self, trainer, *, knobs=(), replace: bool = False, keep_every: int = 5, keep_limit: int = 8):
        # checked first, by the names the caller wrote: a refused lab changes nothing (logged knobs, an old lab)
        points.check_keep(keep_every, keep_limit, ("keep_every", "keep_limit"))
        old = owner.holder_of(trainer)
        if old is not None:
            if not replace:
                raise RuntimeError("trainer: another Lab already drives this trainer; close it (lab.close()) "
                                   "or pass replace=True to stop it and take over")
            old.close()
        trainer.log_knobs(*knobs)  # before the first kept point: a rewind there keeps logging them
        self.trainer, self.closed, self.error = trainer, False, None
        self.state, self.queue, self.scenarios = "paused", Queue(), SCENARIOS
        self.times = StepTimes()
        self.on_step = self.on_change = lambda *a: None
        self.player = Player()
        self._stage: StagedStep | None = None
        self.timeline = Timeline(trainer, every=keep_every, limit=keep_limit)
        self.forks = Forks(trainer)
        owner.hold(trainer, self)  # last: a constructor that raised holds nothing

    # --- the parts, as the panel and the tests read them ------------------------------------------
    @property
    def kept(self):
        return self.timeline.kept

    @property
    def changes(self) -> list:
        return self.timeline.changes

    @property
    def fork_branch(self) -> Branch | None:
        return self.forks.branch

    @property
    def pending(self) -> dict:
        """The main run's knob changes queued for the next step boundary."""
        return self.queue.pending

    def trainers(self) -> list:
        """What the lab's thread steps: the trainer, then the open fork's own trainer."""
        return [self.trainer, *self.forks.trainers()]

    # --- knobs ---------------------------------------------------------------------------------
    def set(self, knob: str, value, *, branch: str = "main") -> None:
        """Queue ``knob = value`` for the next step boundary of ``branch`` ("main" or "fork"); checked now with every
        queued change (raises ValueError/TypeError naming the knob; nothing is queued then)."""
        self.set_many({knob: value}, branch=branch)

    def set_many(self, changes: dict, *, branch: str = "main") -> None:
        """Queue several knobs as one change: checked together (``rlnb.lab.knobs.check_live``), applied together or
        not at all. ``branch``: "main", or "fork" (the open fork's own knobs, applied at its next step). Paused,
        they are applied now, so a combination the trainer refuses raises now and nothing changes."""
        if self.closed:
            raise RuntimeError("set: this lab is closed; its controls no longer drive the trainer (make a new Lab)")
        if branch not in ("main", "fork"):
            raise ValueError(f"branch: expected 'main' or 'fork', got {branch!r}")
        if branch == "fork":
            self.forks.queue(changes)
        else:
            self.queue.add(self.trainer.recipe, changes)
        if self.state != "paused" or self._stage is not None:
            return self.on_change() if branch == "fork" else None
        refused = self._said(self.forks.apply()) if branch == "fork" else self._apply()
        if refused is not None:  # applied now, so say so now (while playing it shows as lab.error)
            raise refused

    def _apply(self) -> Exception | None:
        """Apply the main run's queued changes (between steps only). A combination the Trainer refuses is
        dropped, recorded in ``error`` and returned, and the run goes on with the knobs it had."""
        if not self.queue.pending:
            return None
        made, err = self.queue.apply(self.trainer, before=self.timeline.keep_before_change)
        self.timeline.changes += made
        return self._said(err)

    def _said(self, err: Exception | None) -> Exception | None:
        """Show what a step boundary did: ``error`` names a refused change (None: all applied); the panel
        hears of it."""
        self.error = None if err is None else f"{type(err).__name__}: {err}"
        self.on_change()
        return err

    # --- scenarios -------------------------------------------------------------------------------
    def set_up(self, name: str) -> str:
        """Set scenario ``name`` up (paused only: it may add the reference model and changes several knobs at
        once); returns what it says to try. Refused while playing or mid-step, with nothing changed."""
        s = self._scenario(name)
        self._check_idle("set_up")
        if s.reference and self.trainer.ref_model is None:  # KL is measured whenever there is a reference
            check_live(self.trainer.recipe, {**self.pending, **s.setup})  # refused before the reference is added
            self.trainer.use_reference("start")
        self.set_many(s.setup)
        return describe(name)

    def try_fix(self, name: str) -> Branch:
        """Fork the run now (paused) with scenario ``name``'s fix in the fork only."""
        return self.fork(**self._scenario(name).fix)

    def _scenario(self, name: str):
        if name not in self.scenarios:
            raise ValueError(f"name: expected one of the scenarios {sorted(self.scenarios)}, got {name!r}")
        return self.scenarios[name]

    # --- stepping --------------------------------------------------------------------------------
    def _one_step(self):
        self._apply()
        with self.times.timing():
            record = self.trainer.step()
            self._after_step(record)
        return record

    def _after_step(self, record) -> None:
        """Once the main branch's step has committed: the fork's step (in its own trainer), a periodic keep, the
        panel's hook."""
        refused = self.forks.step()
        if refused is not None:
            self._said(refused)
        self.timeline.keep_if_due()
        self.on_step(record)

    def step(self):
        """Run exactly one step here (paused only) and return its ``StepRecord``."""
        self._check_idle("step")
        self.state = "stepping"
        try:
            return self._one_step()
        finally:
            self.state = "paused"

    def play(self, steps: int | None = None) -> None:
        """Train in the background until ``pause()`` (or ``steps`` more steps); returns at once. The thread drives
        the trainer and the open fork's: the notebook's calls that change them are refused until a pause."""
        self._check_idle("play")
        if steps is not None and (not isinstance(steps, int) or isinstance(steps, bool) or steps < 1):
            raise ValueError(f"steps: expected a positive int or None (until pause), got {steps!r}")
        self.state, self.error = "playing", None
        self.player.start(self._one_step, self.trainers(), steps, on_end=self._played, on_stopped=self._stopped)

    def _played(self, error: str | None) -> None:  # in the thread, once it stops: a point is kept there
        self.error = error if error is not None else self.error
        self.timeline.keep_now()

    def _stopped(self) -> None:
        self.state = "paused"
        self.on_change()

    @property
    def _thread(self):
        return self.player.thread

    def pause(self, *, wait: bool = True, timeout: float | None = None) -> None:
        """Stop after the step in progress (a point is kept there). ``wait=False`` returns at once
        (what the button does, so the kernel never blocks on a step)."""
        self.player.stop(wait=wait, timeout=timeout)

    def wait(self, step: int | None = None, *, timeout: float = 600.0) -> int:
        """Block until the trainer has reached ``step`` (or, with None, until playing stops), or
        ``timeout`` seconds pass, or playing stops; returns the step count. Interrupting the kernel
        while it waits pauses the lab (after the step in progress), then raises the KeyboardInterrupt."""
        self.player.wait(lambda: step is not None and self.trainer.step_count >= step, timeout)
        return self.trainer.step_count

    def step_stage(self):
        """Run the next stage of the current step (sample -> reward -> advantage -> update) and return
        ``(stage, batch)``; after "update" the step has committed (``StagedStep`` keeps the rollback guarantees:
        ``close()`` mid-step rolls it back)."""
        if self._stage is None:
            self._check_idle("step_stage")
            self._apply()
            self._stage = StagedStep(self.trainer, self._after_step, also=self.forks.trainers())
        try:
            return self._stage.next()
        finally:
            if self._stage.done:
                self._stage = None

    def _check_idle(self, what: str) -> None:
        if self.closed:
            raise RuntimeError(f"{what}: this lab is closed; make a new Lab(trainer)")
        if self.state != "paused":
            raise RuntimeError(f"{what}: the lab is {self.state}; pause() first")
        if self._stage is not None and what != "step_stage":
            raise RuntimeError(f"{what}: a step is half-run by step_stage(); finish it with step_stage() "
                               "(to 'update') first")

    # --- kept points, rewind and the fork (between steps, paused) ----------------------------------
    def keep(self) -> int:
        """Keep the run now (paused only) so ``rewind`` can come back to it; returns its step."""
        self._check_idle("keep")
        self.timeline.keep_now()
        return self.trainer.step_count

    def kept_text(self) -> str:
        return self.timeline.text()

    def rewind(self, step: int | None = None) -> int:
        """Back to the point kept at ``step`` (None: the newest kept point; paused only, no open fork); returns
        the step. The steps that follow are bit for bit those that followed it the first time (same knobs)."""
        self._check_idle("rewind")
        if self.forks.is_open():
            raise RuntimeError("rewind: a fork is open; close it first (lab.close_fork()), then rewind the main run")
        point = self.timeline.rewind(step)
        self.forks.forget_after(point.step)
        self.queue.clear()
        self.on_change()
        return self.trainer.step_count

    def fork(self, **knobs) -> Branch:
        """Copy the run now (paused, at a step boundary) into a second branch; ``knobs`` are the fork's own
        changes, applied to it now: a knob ``set`` would refuse (``critic``, ``max_new_tokens`` past the context, a
        bad value) is refused here, naming it, and no fork is made. From now on each step steps both branches, the
        fork in its own trainer. Refused with MemoryError where the copy does not fit (``rlnb.lab.fork.check_fits``)."""
        self._check_idle("fork")
        if self.pending:
            raise RuntimeError(f"fork: knob changes are queued for the main run ({sorted(self.pending)}); "
                               "step once or set them again after forking")
        branch, point = self.forks.open(knobs, len(self.changes))
        self.timeline.kept.add(point)  # the fork point is a natural place to come back to
        self.on_change()
        return branch

    def close_fork(self) -> Branch | None:
        """Stop stepping the fork (paused only); its history and weights stay readable for ``compare``."""
        self._check_idle("close_fork")
        branch = self.forks.close()
        if branch is not None:
            self.on_change()
        return branch

    def in_branch(self, branch: str, fn):
        """``fn(trainer)`` on ``branch``'s trainer ("main" or "fork": the fork's own; paused only)."""
        self._check_idle("in_branch")
        return self.forks.in_branch(branch, fn)

    def labels(self) -> tuple[str, str] | None:
        """(main, fork) legend labels, by what differs: ("beta 0", "beta 0.05 from step 30"); None without a fork."""
        return self.forks.labels()

    # --- status and shutdown ---------------------------------------------------------------------
    def seconds_per_step(self) -> float | None:
        return self.times.median()

    def last_change(self, step: int | None = None):
        """The latest change made by the boundary after ``step`` (None: now), or None."""
        return self.timeline.last_change(self.trainer.step_count if step is None else step)

    def status(self, step: int | None = None) -> str:
        """"step 37 / playing / 1.1 s per step / last change: beta 0 -> 0.05 at step 30", about ``step`` (None:
        the trainer's step now; the panel passes the step its figure shows, so the two never disagree)."""
        step = self.trainer.step_count if step is None else step
        half = self._stage is not None and isinstance(self._stage.out, tuple)
        doing = f"stage {self._stage.out[0]} done" if half else self.state
        return line(step, doing, self.seconds_per_step(), self.last_change(step), self.pending, self.forks.status())

    def close(self) -> None:
        """Stop the background work (waits for the step in progress; a half-run staged step is rolled
        back) and release the trainer so another Lab may drive it."""
        self.pause(wait=True)
        if self._stage is not None:
            self._stage.abort()
            self._stage = None
        self.closed = True
        owner.let_go(self.trainer, self)

