"""Who drives a trainer: the one registry. A lab *holds* a trainer while it is open (so a second lab on it is
refused), and while it plays (or half-runs a step) a background thread *drives* it: calls from any other thread
that would change it or read it mid-step (step, run, rollout, save, reconfigure, set_state, ...) are then refused
with a message that says who drives it and how to take it back.

Refused, not queued: a Lab plays until it is paused, so a call that waited for it from the notebook would
block the kernel for as long as the lab plays, and a ``save`` that slipped in between two background steps
would still race the next one. Pausing first (``lab.pause()``) gives the same checkpoint every time; a step
while the lab owns the trainer is ``lab.step()``.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass


@dataclass
class Claim:
    """``holder``: the open lab (None: only a thread drives); ``thread`` drives it now (None: nobody), named
    ``who`` in refusals ("a playing Lab")."""

    holder: object = None
    thread: threading.Thread | None = None
    who: str = ""

    def driving(self) -> bool:
        return self.thread is not None and self.thread.is_alive()


_OWNERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # trainer -> Claim


def hold(trainer, holder) -> None:
    """``holder`` (an open lab: an object with ``closed``) holds ``trainer`` until ``let_go``; while another open
    holder has it, refused (close that one first)."""
    old = holder_of(trainer)
    if old is not None and old is not holder:
        raise RuntimeError("trainer: another Lab already holds this trainer; close it (lab.close()) first")
    _OWNERS.setdefault(trainer, Claim()).holder = holder


def let_go(trainer, holder) -> None:
    claim = _OWNERS.get(trainer)
    if claim is not None and claim.holder is holder:
        claim.holder = None
        _forget_if_empty(trainer, claim)


def holder_of(trainer):
    """The open lab holding ``trainer``, or None."""
    claim = _OWNERS.get(trainer)
    return None if claim is None or getattr(claim.holder, "closed", False) else claim.holder


def claim(trainer, thread: threading.Thread, who: str) -> None:
    """``thread`` drives ``trainer`` until ``release``; ``who`` names it in refusals ("a playing Lab")."""
    c = _OWNERS.setdefault(trainer, Claim())
    c.thread, c.who = thread, who


def release(trainer, thread: threading.Thread) -> None:
    c = _OWNERS.get(trainer)
    if c is not None and c.thread is thread:
        c.thread, c.who = None, ""
        _forget_if_empty(trainer, c)


def _forget_if_empty(trainer, c: Claim) -> None:
    if c.holder is None and c.thread is None:
        _OWNERS.pop(trainer, None)  # a thread ending and a lab closing may both get here


def driver(trainer) -> str | None:
    """Who drives ``trainer`` in the background now, or None."""
    c = _OWNERS.get(trainer)
    return c.who if c is not None and c.driving() else None


def check(trainer, what: str) -> None:
    """Raise if another thread drives ``trainer`` (the driver itself may call anything)."""
    c = _OWNERS.get(trainer)
    if c is not None and c.driving() and c.thread is not threading.current_thread():
        raise RuntimeError(f"{what}: {c.who} is training this trainer in the background; pause it first "
                           "(lab.pause(), or the Pause button), or step through the lab (lab.step())")
