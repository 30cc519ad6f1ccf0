"""``StagedStep``: one training step run a stage at a time, for the lab's "Step stage" button.

The step runs in a helper thread that waits after each stage (sample -> reward -> advantage -> update), so it
keeps the Trainer's rollback guarantees: abandoning it mid-step (``abort``) raises inside the step, which the
Trainer rolls back. While it is half-run the helper thread drives the trainer (``rlnb.run.owner``).
"""

from __future__ import annotations

import threading

from rlnb.core.runtime import deferred_interrupt
from rlnb.run import owner


class StagedStep:
    """``next()`` runs the next stage and returns ``(stage, batch)`` (after "update" the step has committed and
    ``done`` is True); ``abort()`` rolls the half-run step back. ``after_commit(record)`` runs in the helper thread
    once the step has committed (the lab's fork step and periodic keep); ``also``: other trainers it drives then
    (the fork's), claimed with ``trainer`` for the helper thread.

    A Ctrl-C while ``next()`` waits leaves the stage it waited for undelivered: the helper stays parked after
    that stage, and the next call returns it. So the calls return each stage once, in order, however often
    they are interrupted."""

    def __init__(self, trainer, after_commit, also=()):
        self.trainer, self.after_commit = trainer, after_commit
        self.out, self.done, self._abort = None, False, False
        self._delivered = self._last = None  # the last stage the caller got; the final one, once received
        self._go, self._ready = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="rlnb-lab-stage")
        self._driven = [trainer, *also]
        for t in self._driven:
            owner.claim(t, self.thread, "a Lab's half-run step (step_stage())")
        self.thread.start()

    def next(self):
        """The next stage's ``(stage, batch)``; re-raises what the step raised."""
        if self._last is None:
            if self._delivered is not None:  # the caller has the last stage: let the step go on to the next
                with deferred_interrupt():  # clear, then go, whole: a Ctrl-C between them would park the step
                    self._delivered = None
                    self._ready.clear()
                    self._go.set()
            self._ready.wait()  # a Ctrl-C here leaves the stage undelivered: the next call waits for it again
            out = self.out
            final = isinstance(out, BaseException) or out[0] == "update"
            self._delivered, self._last = out, (out if final else None)  # stores only, then the return
            if not final:
                return out
        self._go.set()
        self.thread.join()  # the commit and after_commit; interrupted here, the next call waits again
        self.done = True
        if isinstance(self.out, BaseException):  # the step's error, or after_commit's (the step committed)
            raise self.out
        return self._last

    def abort(self) -> None:
        """Abandon the half-run step: it raises KeyboardInterrupt inside, and the Trainer rolls it back."""
        self._abort = True
        self._go.set()
        self.thread.join()
        self.done = True

    def on_stage(self, trainer, stage, batch) -> None:  # the step's callback, in the helper thread
        self.out = (stage, batch)
        self._ready.set()
        self._go.wait()
        self._go.clear()
        if self._abort:
            raise KeyboardInterrupt("step_stage: step abandoned")

    def _run(self) -> None:
        try:
            self.after_commit(self.trainer.step(callbacks=[self]))
        except BaseException as err:
            self.out = err
            self._release()  # before the caller goes on
            self._ready.set()
        finally:
            self._release()

    def _release(self) -> None:
        for t in self._driven:
            owner.release(t, threading.current_thread())
