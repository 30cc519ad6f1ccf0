"""``Player``: the lab's background thread, which plays steps until it is told to stop.

Training runs in one background thread, never in the kernel's main thread, so the kernel stays free for
other cells and for the widgets' own messages while the model learns. A thread (and not the kernel's
event loop) because a training step is about a second of blocking torch work: on the event loop it would
freeze every widget for that second; in a thread torch releases the GIL and the kernel keeps answering.
ipywidgets and plotly's FigureWidget send their updates from any thread (the kernel's iopub socket is
thread-safe), so the dashboard redraws while it trains. It also works in a plain Python process, which
is how the tests drive it.

While it plays the thread drives the trainers it steps (``rlnb.run.owner``): the notebook's calls that would
change them or read them mid-step are refused, naming the way back (pause first).
"""

from __future__ import annotations

import threading
import time

from rlnb.run import owner


class Player:
    """One background thread at a time: ``start`` runs ``one_step()`` until ``stop()`` (or ``steps`` steps) or an
    error; ``thread`` is the last one started (None before the first)."""

    def __init__(self):
        self.thread: threading.Thread | None = None
        self._stop = threading.Event()

    def start(self, one_step, trainers: list, steps: int | None, on_end, on_stopped) -> None:
        """Play in a new thread that drives ``trainers`` (claimed before it starts). Once it stops, still in
        it: ``on_end(error)`` (the error that ended it, as text, or None) while it still drives them, then,
        after letting go, ``on_stopped()``."""
        self._stop.clear()
        self.thread = threading.Thread(target=self._run, args=(one_step, list(trainers), steps, on_end, on_stopped),
                                       name="rlnb-lab", daemon=True)
        for t in trainers:
            owner.claim(t, self.thread, "a playing Lab")
        self.thread.start()

    def _run(self, one_step, trainers, steps, on_end, on_stopped) -> None:
        error = None
        try:
            n = 0
            while not self._stop.is_set() and (steps is None or n < steps):
                one_step()
                n += 1
        except BaseException as err:  # the Trainer rolled the failed step back; say what happened
            error = f"{type(err).__name__}: {err}"
        finally:
            try:
                on_end(error)
            finally:
                for t in trainers:
                    owner.release(t, threading.current_thread())
                on_stopped()

    def stop(self, *, wait: bool = True, timeout: float | None = None) -> None:
        """Stop after the step in progress; with ``wait``, return once the thread has ended (or ``timeout``)."""
        self._stop.set()
        th = self.thread
        if wait and th is not None and th is not threading.current_thread():
            th.join(timeout)

    def playing(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def wait(self, reached, timeout: float) -> None:
        """Block until ``reached()``, the thread ends, or ``timeout`` seconds pass. Interrupting the kernel while
        it waits stops the thread (after the step in progress), then raises the KeyboardInterrupt."""
        t0 = time.monotonic()
        try:
            while self.playing() and time.monotonic() - t0 < timeout and not reached():
                time.sleep(0.02)
        except KeyboardInterrupt:
            self.stop(wait=True)
            raise
