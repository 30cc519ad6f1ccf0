"""Kept points of a run: in-memory copies the lab can rewind to, or a fork can start from.

A ``Point`` is everything the next steps depend on (a ``Snapshot`` with weights, optimizer and scheduler, plus
recipe, reference and the kept ``StepRecord``s), so ``put`` followed by the same knobs gives the same steps, bit
for bit. ``Kept`` holds a bounded number of them: every ``every`` steps and just before each knob change (so
rewinding there undoes the change), the run's first point always, the newest others; the oldest go first.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from rlnb.run.state import Snapshot, restore, snapshot


@dataclass
class Point:
    """The run at the boundary before step ``step + 1``; ``changes``: how many lab changes had happened."""

    snap: Snapshot
    recipe: object
    ref: object
    records: list
    changes: int

    @property
    def step(self) -> int:
        return self.snap.state.step

    @property
    def history(self) -> list[dict]:
        return self.snap.state.history


def take(trainer, changes: int = 0) -> Point:
    """The trainer's run now, as a ``Point`` (between steps only). A point is a step boundary the lab comes back
    to, never the middle of a ``run(n)``: putting it back leaves no interrupted run to finish."""
    snap = snapshot(trainer, weights=True)
    snap.state.run_target = None
    return Point(snap, trainer.recipe, trainer.ref_model, list(trainer.records), changes)


def put(trainer, point: Point) -> None:
    """Put ``trainer`` back to ``point`` (recipe and reference too); the point stays intact, so it can be put
    back again."""
    ref_changed = trainer.ref_model is not point.ref
    if ref_changed:
        trainer.use_reference(point.ref, rebuild=False)
    if ref_changed or trainer.recipe != point.recipe:
        trainer.set_recipe(point.recipe)  # rebuilds the stages on the point's recipe and reference
    restore(trainer, point.snap)                # through Trainer.set_state, like every write of run state
    trainer.records.clear()
    trainer.records.extend(point.records)


def tensor_bytes(obj) -> int:
    """Bytes of every tensor in nested dicts / lists (a state_dict, an optimizer state)."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(v) for v in obj)
    return 0


def point_bytes(point: Point) -> int:
    """Memory a point holds: its weights, optimizer and scheduler copies (history and records are small)."""
    s = point.snap
    return tensor_bytes(s.weights) + tensor_bytes(s.optimizer) + tensor_bytes(s.scheduler)


def free_bytes(device: torch.device | str = "cpu") -> int:
    """Memory free for a copy now: the accelerator's free memory on CUDA, else the machine's available RAM."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo") as f:
            info = dict(line.split(":", 1) for line in f)
        return int(info["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):  # not Linux: free pages (an underestimate)
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def check_keep(every, limit, names: tuple[str, str] = ("every", "limit")) -> None:
    """``every`` an int >= 1 and ``limit`` an int >= 2 (the first point and one more); errors use ``names``."""
    for name, v, least in ((names[0], every, 1), (names[1], limit, 2)):
        if not isinstance(v, int) or isinstance(v, bool) or v < least:
            raise ValueError(f"{name}: expected an int >= {least}, got {v!r}")


class Kept:
    """At most ``limit`` points: the first always, then the newest. ``due(step)``: whether the periodic keep
    (every ``every`` steps) falls at ``step``."""

    def __init__(self, *, every: int = 5, limit: int = 8):
        check_keep(every, limit)
        self.every, self.limit, self.points = every, limit, []

    def add(self, point: Point) -> None:
        """Keep ``point`` (replacing one kept at the same step); past ``limit`` the oldest but the first goes."""
        self.points = [p for p in self.points if p.step != point.step] + [point]
        self.points.sort(key=lambda p: p.step)
        if len(self.points) > self.limit:
            del self.points[1]

    def due(self, step: int) -> bool:
        return step % self.every == 0 and step not in self.steps()

    def steps(self) -> list[int]:
        return [p.step for p in self.points]

    def get(self, step: int | None = None) -> Point:
        """The point kept at ``step`` (None: the newest); an unkept step raises naming the kept ones."""
        if step is None:
            return self.points[-1]
        if isinstance(step, bool) or not isinstance(step, int):  # True == 1 would pick step 1
            raise TypeError(f"step: expected a kept step (an int; kept: {self.steps()}) or None, got {step!r}")
        for p in self.points:
            if p.step == step:
                return p
        raise ValueError(f"step: {step!r} is not a kept step; kept: {self.steps()}")

    def drop_after(self, step: int) -> None:
        """Forget the points past ``step`` (a rewind there starts a new future)."""
        self.points = [p for p in self.points if p.step <= step]

    def nbytes(self) -> int:
        """Memory all kept points hold (weights share nothing between points: each is a copy)."""
        return sum(point_bytes(p) for p in self.points)
