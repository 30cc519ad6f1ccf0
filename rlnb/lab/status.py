"""What the lab says about itself: how long its steps take (``StepTimes``) and its one-line status (``line``)."""

from __future__ import annotations

import contextlib
import time


class StepTimes:
    """The wall time of the last ``keep`` steps (a step that raised is not counted)."""

    def __init__(self, keep: int = 10):
        self.seconds: list[float] = []
        self.keep = keep

    @contextlib.contextmanager
    def timing(self):
        t0 = time.perf_counter()
        yield
        self.seconds = (self.seconds + [time.perf_counter() - t0])[-self.keep:]

    def median(self) -> float | None:
        s = sorted(self.seconds)
        return s[len(s) // 2] if s else None


def line(step: int, doing: str, seconds: float | None, change, pending: dict, more: list[str] = ()) -> str:
    """The status line: the step shown, what the lab does, seconds per step, the last knob change, the changes
    queued for the next step, then ``more`` (the fork's part).

    >>> line(37, "playing", 1.12, "beta 0 -> 0.05 at step 30", {"lr": 0.001})
    'step 37 / playing / 1.1 s per step / last change: beta 0 -> 0.05 at step 30 / next step: lr=0.001'
    >>> line(0, "paused", None, None, {})
    'step 0 / paused / - s per step / no knob changed yet'
    """
    parts = [f"step {step}", doing, f"{seconds:.2g} s per step" if seconds is not None else "- s per step",
             f"last change: {change}" if change else "no knob changed yet"]
    if pending:
        parts.append("next step: " + ", ".join(f"{k}={v!r}" for k, v in pending.items()))
    return " / ".join(parts + list(more))
