"""``StagedStep``: one training step run a stage at a time, for the lab's "Step stage" button.

The step runs in a helper thread that waits after each stage (sample -> reward -> advantage -> update), so it
keeps the Trainer's rollback guarantees: abandoning it mid-step (``abort``) raises inside the step, which the
Trainer rolls back. While it is half-run the helper thread drives the trainer (``rlnb.run.owner``).
"""

from __future__ import annotations

import threading

from rlnb.run import owner


class StagedStep:
    """``next()`` runs the next stage and returns ``(stage, batch)`` (after "update" the step has committed and
    ``done`` is True); ``abort()`` rolls the half-run step back. ``after_commit(record)`` runs in the helper thread
    once the step has committed (the lab's fork step and periodic keep)."""

    def __init__(self, trainer, after_commit):
        self.trainer, self.after_commit = trainer, after_commit
        self.out, self.done, self._abort = None, False, False
        self._go, self._ready = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="rlnb-lab-stage")
        owner.claim(trainer, self.thread, "a Lab's half-run step (step_stage())")
        self.thread.start()
        self._started = False

    def next(self):
        """The next stage's ``(stage, batch)``; re-raises what the step raised."""
        if self._started:
            self._go.set()
        self._started = True
        self._ready.wait()
        self._ready.clear()
        out = self.out
        if isinstance(out, BaseException) or out[0] == "update":
            self._go.set()
            self.thread.join()
            self.done = True
            if isinstance(out, BaseException):
                raise out
        return out

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
            owner.release(self.trainer, threading.current_thread())  # before the caller goes on
            self._ready.set()
        finally:
            owner.release(self.trainer, threading.current_thread())
