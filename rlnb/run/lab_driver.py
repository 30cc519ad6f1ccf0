"""``LabLoop``: the lab's engine without any widget: play / pause / step / step a stage / rewind.

Training runs in one background thread, never in the kernel's main thread, so the kernel stays free for
other cells and for the widgets' own messages while the model learns. A thread (and not the kernel's
event loop) because a training step is about a second of blocking torch work: on the event loop it would
freeze every widget for that second; in a thread torch releases the GIL and the kernel keeps answering.
ipywidgets and plotly's FigureWidget send their updates from any thread (the kernel's iopub socket is
thread-safe), so the dashboard redraws while it trains. It also works in a plain Python process, which
is how the tests drive it.

Knob changes are queued and applied between steps, never inside one (``Trainer.reconfigure``), so a
step always runs with one set of knobs, and ``history[i]["hp/<knob>"]`` says which.
"""

from __future__ import annotations

import threading
import time
import weakref

from rlnb.run import owner, points
from rlnb.run.fork import Change  # noqa: F401  (re-exported: the lab's change record)
from rlnb.run.lab_branches import LabBranches

STATES = ("paused", "playing", "stepping")
STAGES = ("sample", "reward", "advantage", "update")
_OWNERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # trainer -> the open loop driving it


class LabLoop(LabBranches):
    """Drives ``trainer`` one step (or one stage) at a time, in a background thread when playing.

    ``play()`` returns at once; ``pause(wait=True)`` returns once the step in progress has committed
    (at most one more step runs); ``step()`` runs exactly one step in the caller's thread; ``step_stage()``
    runs the next stage and returns ``(stage, batch)``; ``rewind(step)`` goes back to any kept point (``kept``:
    when the lab was made, every ``keep_every`` steps, before each knob change and each time playing stops; at most
    ``keep_limit``, bit-exact: the same knobs give the same steps); ``keep()`` keeps one now; ``fork()`` starts a
    second branch (``LabBranches``). ``set(knob, value)`` validates at once (a bad value raises the knob's own error
    and nothing changes) and applies at the next step boundary. ``on_step(record)`` and ``on_change()`` are hooks
    the panel fills.
    """

    def __init__(self, trainer, *, knobs=(), replace: bool = False, keep_every: int = 5, keep_limit: int = 8):
        old = _OWNERS.get(trainer)
        if old is not None and not old.closed:
            if not replace:
                raise RuntimeError("trainer: another Lab already drives this trainer; close it (lab.close()) "
                                   "or pass replace=True to stop it and take over")
            old.close()
        self.trainer, self.closed, self.error = trainer, False, None
        trainer.logged_knobs = tuple(dict.fromkeys((*trainer.logged_knobs, *knobs)))
        self.state, self.changes, self.pending = "paused", [], {}
        self.step_seconds: list[float] = []
        self.on_step = self.on_change = lambda *a: None
        self._lock, self._stop = threading.Lock(), threading.Event()
        self._thread: threading.Thread | None = None
        self._stage = None  # the half-run step of step_stage(): its thread and handshake
        self.kept = points.Kept(every=keep_every, limit=keep_limit)
        self.kept.add(points.take(trainer))
        self.fork_branch = None  # the open (or last closed) fork: rlnb.run.fork.Branch
        _OWNERS[trainer] = self  # last: a constructor that raised owns nothing

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
            return self._set_fork(changes)
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
        t = self.trainer
        before = {k: t.knob(k) for k in changes}
        if t.step_count not in self.kept.steps():  # rewinding here undoes the change
            self.kept.add(points.take(t, len(self.changes)))
        try:
            t.reconfigure(**changes)
        except (ValueError, TypeError) as err:
            self.error = f"{type(err).__name__}: {err}"
            self.on_change()
            return err
        else:
            self.error = None
            self.changes += [Change(k, before[k], t.knob(k), t.step_count + 1) for k in changes
                             if before[k] != t.knob(k)]
        self.on_change()

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
        self._step_fork()
        if self.kept.due(self.trainer.step_count):
            self.kept.add(points.take(self.trainer, len(self.changes)))
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
            self._keep_now()
            owner.release(self.trainer, threading.current_thread())
            self.state = "paused"
            self.on_change()

    def pause(self, *, wait: bool = True, timeout: float | None = None) -> None:
        """Stop after the step in progress (a checkpoint is taken there). ``wait=False`` returns at once
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
        ``(stage, batch)``; after "update" the step has committed. The step runs in a helper thread that
        waits after each stage, so it keeps the Trainer's rollback guarantees (``close()`` mid-step rolls
        it back)."""
        if self._stage is None:
            self._check_idle("step_stage")
            self._apply()
            self._stage = {"go": threading.Event(), "done": threading.Event(), "out": None, "abort": False}
            self._stage["thread"] = threading.Thread(target=self._staged, args=(self._stage,), daemon=True)
            owner.claim(self.trainer, self._stage["thread"], "a Lab's half-run step (step_stage())")
            self._stage["thread"].start()
        else:
            self._stage["go"].set()
        s = self._stage
        s["done"].wait()
        s["done"].clear()
        out = s["out"]
        if isinstance(out, BaseException) or out[0] == "update":
            s["go"].set()
            s["thread"].join()
            self._stage = None
            if isinstance(out, BaseException):
                raise out
        return out

    def _staged(self, s) -> None:
        loop = self

        class Hold:
            def on_stage(self, trainer, stage, batch):
                s["out"] = (stage, batch)
                s["done"].set()
                s["go"].wait()
                s["go"].clear()
                if s["abort"]:
                    raise KeyboardInterrupt("step_stage: step abandoned")

        try:
            record = loop.trainer.step(callbacks=[Hold()])
            loop._after_step(record)
        except BaseException as err:
            s["out"] = err
            owner.release(loop.trainer, threading.current_thread())  # before the caller goes on
            s["done"].set()
        finally:
            owner.release(loop.trainer, threading.current_thread())

    def _check_idle(self, what: str) -> None:
        if self.closed:
            raise RuntimeError(f"{what}: this lab is closed; make a new Lab(trainer)")
        if self.state != "paused":
            raise RuntimeError(f"{what}: the lab is {self.state}; pause() first")
        if self._stage is not None and what != "step_stage":
            raise RuntimeError(f"{what}: a step is half-run by step_stage(); finish it with step_stage() "
                               "(to 'update') first")

    # --- status and shutdown ---------------------------------------------------------------------
    def seconds_per_step(self) -> float | None:
        s = sorted(self.step_seconds)
        return s[len(s) // 2] if s else None

    def last_change(self, step: int | None = None):
        """The latest change made by the boundary after ``step`` (None: now), or None: a change applied while
        paused at step 2 is "beta 0 -> 0.05 at step 3" from then on."""
        step = self.trainer.step_count if step is None else step
        return next((c for c in reversed(self.changes) if c.step <= step + 1), None)

    def status(self, step: int | None = None) -> str:
        """"step 37 / playing / 1.1 s per step / last change: beta 0 -> 0.05 at step 30", about ``step`` (None:
        the trainer's step now; the panel passes the step its figure shows, so the two never disagree)."""
        step = self.trainer.step_count if step is None else step
        sps, change = self.seconds_per_step(), self.last_change(step)
        parts = [f"step {step}", "stage " + self._stage["out"][0] + " done"
                 if self._stage is not None and isinstance(self._stage["out"], tuple) else self.state]
        parts.append(f"{sps:.2g} s per step" if sps is not None else "- s per step")
        parts.append(f"last change: {change}" if change else "no knob changed yet")
        if self.pending:
            parts.append("next step: " + ", ".join(f"{k}={v!r}" for k, v in self.pending.items()))
        return " / ".join(parts + self._fork_status())

    def close(self) -> None:
        """Stop the background work (waits for the step in progress; a half-run staged step is rolled
        back) and release the trainer so another Lab may drive it."""
        self.pause(wait=True)
        if self._stage is not None:
            self._stage["abort"] = True
            self._stage["go"].set()
            self._stage["thread"].join()
            self._stage = None
        self.closed = True
        if _OWNERS.get(self.trainer) is self:
            del _OWNERS[self.trainer]


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
