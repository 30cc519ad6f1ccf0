"""``LabLoop``: the lab's engine without any widget: play / pause / step / step a stage / rewind / fork.

Training runs in one background thread, never in the kernel's main thread, so the kernel stays free for
other cells and for the widgets' own messages while the model learns. A thread (and not the kernel's
event loop) because a training step is about a second of blocking torch work: on the event loop it would
freeze every widget for that second; in a thread torch releases the GIL and the kernel keeps answering.
ipywidgets and plotly's FigureWidget send their updates from any thread (the kernel's iopub socket is
thread-safe), so the dashboard redraws while it trains. It also works in a plain Python process, which
is how the tests drive it.

Knob changes are queued and applied between steps, never inside one (``Trainer.reconfigure``), so a
step always runs with one set of knobs, and ``history[i]["hp/<knob>"]`` says which. The loop is made of parts
it holds: a ``Timeline`` (kept points, changes, rewind), ``Forks`` (the second branch), a ``StagedStep`` while a
step is half-run, and the ``SCENARIOS`` it can set up; the trainer's owner is recorded in ``rlnb.run.owner``.
"""

from __future__ import annotations

import threading
import time

from rlnb.lab import points
from rlnb.lab.fork import Branch, Forks
from rlnb.lab.scenarios import SCENARIOS, describe
from rlnb.lab.staged import StagedStep
from rlnb.lab.timeline import Timeline, apply_changes
from rlnb.run import owner

STATES = ("paused", "playing", "stepping")
STAGES = ("sample", "reward", "advantage", "update")


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
        self.state, self.pending, self.scenarios = "paused", {}, SCENARIOS
        self.step_seconds: list[float] = []
        self.on_step = self.on_change = lambda *a: None
        self._lock, self._stop = threading.Lock(), threading.Event()
        self._thread: threading.Thread | None = None
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

    # --- knobs ---------------------------------------------------------------------------------
    def set(self, knob: str, value, *, branch: str = "main") -> None:
        """Queue ``knob = value`` for the next step boundary (of ``branch``: "main" or "fork"). Validated now
        against the recipe with every queued change (raises ValueError/TypeError naming the knob; nothing is
        queued then)."""
        self.set_many({knob: value}, branch=branch)

    def set_many(self, changes: dict, *, branch: str = "main") -> None:
        """Queue several knobs as one change: validated together, applied together or not at all. ``branch``:
        "main", or "fork" (the open fork's own knobs, applied at its next step)."""
        if branch == "fork":
            self.forks.queue(changes)
            return self.on_change()
        if branch != "main":
            raise ValueError(f"branch: expected 'main' or 'fork', got {branch!r}")
        if self.closed:
            raise RuntimeError("set: this lab is closed; its controls no longer drive the trainer (make a new Lab)")
        if "critic" in changes and changes["critic"] != self.trainer.recipe.critic:
            raise ValueError("critic: cannot switch the value head on or off live (it adds a module to the "
                             "optimizer); build a new Trainer with the recipe instead")
        with self._lock:
            trial = {**self.pending, **changes}
            self.trainer.recipe.replace(**trial)
            self.pending = trial
        if self.state == "paused" and self._stage is None:
            refused = self._apply()
            if refused is not None:  # applied now, so say so now (while playing it shows as lab.error)
                raise refused

    def _apply(self) -> Exception | None:
        """Apply the queued changes (between steps only). A combination the Trainer refuses is dropped,
        recorded in ``error`` and returned, and the run goes on with the knobs it had."""
        with self._lock:
            changes, self.pending = self.pending, {}
        if not changes:
            return None
        self.timeline.keep_before_change()
        try:
            self.timeline.changes += apply_changes(self.trainer, changes)
        except (ValueError, TypeError) as err:
            self.error = f"{type(err).__name__}: {err}"
            self.on_change()
            return err
        self.error = None
        self.on_change()

    # --- scenarios -------------------------------------------------------------------------------
    def set_up(self, name: str) -> str:
        """Queue scenario ``name``'s knobs (next step boundary); returns what it says to try."""
        s = self._scenario(name)
        if s.reference and self.trainer.ref_model is None:  # KL is measured whenever there is a reference
            if self.state != "paused":
                raise RuntimeError(f"{name}: pause first (this scenario adds the reference model)")
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
        t0 = time.perf_counter()
        record = self.trainer.step()
        self._after_step(record)
        self.step_seconds = (self.step_seconds + [time.perf_counter() - t0])[-10:]
        return record

    def _after_step(self, record) -> None:
        """Once the main branch's step has committed: the fork's step, a periodic keep, the panel's hook."""
        self.forks.step(len(self.changes))
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
        """Train in the background until ``pause()`` (or ``steps`` more steps); returns at once."""
        self._check_idle("play")
        if steps is not None and (not isinstance(steps, int) or isinstance(steps, bool) or steps < 1):
            raise ValueError(f"steps: expected a positive int or None (until pause), got {steps!r}")
        self._stop.clear()
        self.state, self.error = "playing", None
        self._thread = threading.Thread(target=self._play, args=(steps,), name="rlnb-lab", daemon=True)
        owner.claim(self.trainer, self._thread, "a playing Lab")
        self._thread.start()

    def _play(self, steps) -> None:
        try:
            n = 0
            while not self._stop.is_set() and (steps is None or n < steps):
                self._one_step()
                n += 1
        except BaseException as err:  # the Trainer rolled the failed step back; say what happened
            self.error = f"{type(err).__name__}: {err}"
        finally:
            self.timeline.keep_now()
            owner.release(self.trainer, threading.current_thread())
            self.state = "paused"
            self.on_change()

    def pause(self, *, wait: bool = True, timeout: float | None = None) -> None:
        """Stop after the step in progress (a point is kept there). ``wait=False`` returns at once
        (what the button does, so the kernel never blocks on a step)."""
        self._stop.set()
        th = self._thread
        if wait and th is not None and th is not threading.current_thread():
            th.join(timeout)

    def wait(self, step: int | None = None, *, timeout: float = 600.0) -> int:
        """Block until the trainer has reached ``step`` (or, with None, until playing stops), or
        ``timeout`` seconds pass, or playing stops; returns the step count. Interrupting the kernel
        while it waits pauses the lab (after the step in progress), then raises the KeyboardInterrupt."""
        t0 = time.monotonic()
        try:
            while self.state == "playing" and time.monotonic() - t0 < timeout:
                if step is not None and self.trainer.step_count >= step:
                    break
                time.sleep(0.02)
        except KeyboardInterrupt:
            self.pause(wait=True)
            raise
        return self.trainer.step_count

    def step_stage(self):
        """Run the next stage of the current step (sample -> reward -> advantage -> update) and return
        ``(stage, batch)``; after "update" the step has committed (``StagedStep`` keeps the rollback guarantees:
        ``close()`` mid-step rolls it back)."""
        if self._stage is None:
            self._check_idle("step_stage")
            self._apply()
            self._stage = StagedStep(self.trainer, self._after_step)
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
        with self._lock:
            self.pending = {}
        self.on_change()
        return self.trainer.step_count

    def fork(self, **knobs) -> Branch:
        """Copy the run now (paused, at a step boundary) into a second branch; ``knobs`` are the fork's own
        changes (applied at its first step). From now on each step steps both branches. Refused with
        MemoryError where the copy does not fit (``rlnb.lab.fork.check_fits``)."""
        self._check_idle("fork")
        if self.pending:
            raise RuntimeError(f"fork: knob changes are queued for the main run ({sorted(self.pending)}); "
                               "step once or set them again after forking")
        branch = self.forks.open(knobs)
        self.timeline.kept.add(branch.point)  # the fork point is a natural place to come back to
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
        """``fn(trainer)`` with ``branch`` ("main" or "fork") put in the trainer (paused only); main put back."""
        self._check_idle("in_branch")
        return self.forks.in_branch(branch, fn, len(self.changes))

    def labels(self) -> tuple[str, str] | None:
        """(main, fork) legend labels, by what differs: ("beta 0", "beta 0.05 from step 30"); None without a fork."""
        return self.forks.labels()

    # --- status and shutdown ---------------------------------------------------------------------
    def seconds_per_step(self) -> float | None:
        s = sorted(self.step_seconds)
        return s[len(s) // 2] if s else None

    def last_change(self, step: int | None = None):
        """The latest change made by the boundary after ``step`` (None: now), or None."""
        return self.timeline.last_change(self.trainer.step_count if step is None else step)

    def status(self, step: int | None = None) -> str:
        """"step 37 / playing / 1.1 s per step / last change: beta 0 -> 0.05 at step 30", about ``step`` (None:
        the trainer's step now; the panel passes the step its figure shows, so the two never disagree)."""
        step = self.trainer.step_count if step is None else step
        sps, change = self.seconds_per_step(), self.last_change(step)
        half = self._stage is not None and isinstance(self._stage.out, tuple)
        parts = [f"step {step}", f"stage {self._stage.out[0]} done" if half else self.state]
        parts.append(f"{sps:.2g} s per step" if sps is not None else "- s per step")
        parts.append(f"last change: {change}" if change else "no knob changed yet")
        if self.pending:
            parts.append("next step: " + ", ".join(f"{k}={v!r}" for k, v in self.pending.items()))
        return " / ".join(parts + self.forks.status())

    def close(self) -> None:
        """Stop the background work (waits for the step in progress; a half-run staged step is rolled
        back) and release the trainer so another Lab may drive it."""
        self.pause(wait=True)
        if self._stage is not None:
            self._stage.abort()
            self._stage = None
        self.closed = True
        owner.let_go(self.trainer, self)


def measure_kl(trainer):
    """Give a trainer without a reference the run's starting weights as one, so the lab logs the KL to the start
    at every step whatever beta is (beta = 0 keeps it out of the loss): turning beta on then shows its effect, not
    a jump from "unmeasured". Costs one reference forward per step. Returns the reference it added (or None:
    the trainer had one, or its model is too big to have kept its starting weights)."""
    if trainer.ref_model is not None:
        return None
    try:
        return trainer.use_reference("start")
    except ValueError:
        return None
