"""The main run's timeline: the points kept to rewind to, and the knob changes made along the way.

A ``Timeline`` belongs to one lab. It keeps a point when the lab is made, every ``every`` steps, just before each
knob change (so rewinding there undoes it) and each time playing stops; ``rewind(step)`` puts one back, forgets the
points and changes after it, and the steps that follow are bit for bit those that followed it the first time.

Everything here runs between steps, in the thread that owns the trainer (the playing thread, or the caller's
while the lab is paused), so the trainer never holds a run half put back.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlnb.lab import points


@dataclass(frozen=True)
class Change:
    """A knob moved by the lab: ``step`` is the first step that ran with ``new``."""

    knob: str
    old: object
    new: object
    step: int

    def __str__(self) -> str:
        return f"{self.knob} {self.old:g} -> {self.new:g} at step {self.step}" if all(
            isinstance(v, (int, float)) for v in (self.old, self.new)) else \
            f"{self.knob} {self.old} -> {self.new} at step {self.step}"


def apply_changes(trainer, changes: dict) -> list[Change]:
    """``trainer.reconfigure(**changes)`` (between steps; raises as it does) and the ``Change`` records of the
    knobs whose running value moved."""
    before = {k: trainer.knob(k) for k in changes}
    trainer.reconfigure(**changes)
    return [Change(k, before[k], trainer.knob(k), trainer.step_count + 1) for k in changes
            if before[k] != trainer.knob(k)]


class Timeline:
    """Kept points (``kept``, a ``points.Kept``) and the changes (``changes``, ``Change`` records in order) of the
    main run of ``trainer``."""

    def __init__(self, trainer, *, every: int = 5, limit: int = 8):
        self.trainer, self.changes = trainer, []
        self.kept = points.Kept(every=every, limit=limit)
        self.kept.add(points.take(trainer))

    def keep_now(self) -> points.Point:
        point = points.take(self.trainer, len(self.changes))
        self.kept.add(point)
        return point

    def keep_before_change(self) -> None:
        """Keep the run before a change unless its step is kept already: rewinding there undoes the change."""
        if self.trainer.step_count not in self.kept.steps():
            self.keep_now()

    def keep_if_due(self) -> None:
        if self.kept.due(self.trainer.step_count):
            self.keep_now()

    def rewind(self, step: int | None = None) -> points.Point:
        """Put back the point kept at ``step`` (None: the newest; an unkept step raises naming the kept ones,
        before anything changes); the points and changes after it are forgotten. Returns the point."""
        point = self.kept.get(step)
        points.put(self.trainer, point)
        self.kept.drop_after(point.step)
        self.changes = self.changes[:point.changes]
        return point

    def last_change(self, step: int) -> Change | None:
        """The latest change made by the boundary after ``step``: a change applied while paused at step 2 is
        "beta 0 -> 0.05 at step 3" from then on."""
        return next((c for c in reversed(self.changes) if c.step <= step + 1), None)

    def text(self) -> str:
        """"kept steps 0, 5, 10 (3 points, 36 MiB)": what rewind can reach and the memory it holds."""
        steps, n = ", ".join(map(str, self.kept.steps())), len(self.kept.points)
        kept = f"kept step {steps} (1 point" if n == 1 else f"kept steps {steps} ({n} points"
        return f"{kept}, {self.kept.nbytes() / 2**20:.0f} MiB)"
