"""One owner at a time: while a background driver (a playing Lab) steps a trainer, calls from any other
thread that would change it or read it mid-step (step, run, rollout, save, reconfigure, set_state, ...) are
refused with a message that says who drives it and how to take it back.

Refused, not queued: a Lab plays until it is paused, so a call that waited for it from the notebook would
block the kernel for as long as the lab plays, and a ``save`` that slipped in between two background steps
would still race the next one. Pausing first (``lab.pause()``) gives the same checkpoint every time; a step
while the lab owns the trainer is ``lab.step()``.
"""

from __future__ import annotations

import threading
import weakref

_DRIVERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # trainer -> (thread, who)


def claim(trainer, thread: threading.Thread, who: str) -> None:
    """``thread`` drives ``trainer`` until ``release``; ``who`` names it in refusals ("a playing Lab")."""
    _DRIVERS[trainer] = (thread, who)


def release(trainer, thread: threading.Thread) -> None:
    if _DRIVERS.get(trainer, (None,))[0] is thread:
        del _DRIVERS[trainer]


def driver(trainer) -> str | None:
    """Who drives ``trainer`` in the background now, or None."""
    th, who = _DRIVERS.get(trainer, (None, None))
    return who if th is not None and th.is_alive() else None


def check(trainer, what: str) -> None:
    """Raise if another thread drives ``trainer`` (the driver itself may call anything)."""
    th, who = _DRIVERS.get(trainer, (None, None))
    if th is not None and th.is_alive() and th is not threading.current_thread():
        raise RuntimeError(f"{what}: {who} is training this trainer in the background; pause it first "
                           "(lab.pause(), or the Pause button), or step through the lab (lab.step())")
