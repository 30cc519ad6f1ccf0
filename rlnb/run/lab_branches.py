"""The lab's kept points and its fork: ``keep``, ``rewind(step)``, ``fork``, ``close_fork`` (mixed into
``LabLoop``, which owns the trainer, the kept points and the thread; ``rlnb.run.fork`` says how a fork works).

Everything here runs between steps, in the thread that owns the trainer (the playing thread, or the caller's
while the lab is paused), so the trainer never holds a branch half put back.
"""

from __future__ import annotations

from rlnb.run import fork as fork_mod
from rlnb.run import points


class LabBranches:
    """Kept points and the fork of a ``LabLoop`` (which sets ``trainer``, ``kept``, ``changes``, ``pending``,
    ``fork_branch``, ``on_change`` and ``_check_idle``)."""

    # --- kept points and rewind ------------------------------------------------------------------
    def _keep_now(self) -> None:
        self.kept.add(points.take(self.trainer, len(self.changes)))

    def keep(self) -> int:
        """Keep the run now (paused only) so ``rewind`` can come back to it; returns its step."""
        self._check_idle("keep")
        self._keep_now()
        return self.trainer.step_count

    def kept_text(self) -> str:
        """"kept steps 0, 5, 10 (3 points, 36 MiB)": what rewind can reach and the memory it holds."""
        steps = ", ".join(map(str, self.kept.steps()))
        return f"kept steps {steps} ({len(self.kept.points)} points, {self.kept.nbytes() / 2**20:.0f} MiB)"

    def rewind(self, step: int | None = None) -> int:
        """Back to the point kept at ``step`` (None: the newest kept point; paused only, no open fork); returns
        the step. The steps that follow are bit for bit those that followed it the first time (same knobs). The
        points kept after it are dropped: the run goes on from there with a new future."""
        self._check_idle("rewind")
        if self.fork_branch is not None and not self.fork_branch.closed:
            raise RuntimeError("rewind: a fork is open; close it first (lab.close_fork()), then rewind the main run")
        point = self.kept.get(step)  # an unkept step raises, naming the kept ones, before anything changes
        points.put(self.trainer, point)
        self.kept.drop_after(point.step)
        if self.fork_branch is not None and self.fork_branch.since > point.step:
            self.fork_branch = None  # a closed fork from a step that no longer happened: nothing to compare with
        self.changes = self.changes[:point.changes]
        with self._lock:
            self.pending = {}
        self.on_change()
        return self.trainer.step_count

    # --- the fork --------------------------------------------------------------------------------
    def fork(self, **knobs) -> fork_mod.Branch:
        """Copy the run now (paused, at a step boundary) into a second branch; ``knobs`` are the fork's own
        changes (applied at its first step). From now on each step steps both branches. Refused with
        MemoryError where the copy does not fit (``rlnb.run.fork.check_fits``)."""
        self._check_idle("fork")
        if self.fork_branch is not None and not self.fork_branch.closed:
            raise RuntimeError("fork: a fork is already open; close it first (lab.close_fork())")
        if self.pending:
            raise RuntimeError(f"fork: knob changes are queued for the main run ({sorted(self.pending)}); "
                               "step once or set them again after forking")
        fork_mod.check_fits(self.trainer)
        t = self.trainer
        t.recipe.replace(**knobs)  # raises naming a bad knob before anything changes
        branch = fork_mod.Branch(since=t.step_count, point=points.take(t, 0), pending=dict(knobs))
        self.fork_branch = branch
        self.kept.add(branch.point)  # the fork point is a natural place to come back to
        self.on_change()
        return branch

    def _set_fork(self, changes: dict) -> None:
        b = self.fork_branch
        if b is None or b.closed:
            raise RuntimeError("branch: no fork is open; lab.fork() first")
        with self._lock:
            trial = {**b.pending, **changes}
            b.recipe.replace(**trial)
            b.pending = trial
        self.on_change()

    def close_fork(self) -> fork_mod.Branch | None:
        """Stop stepping the fork (paused only); its history and weights stay readable for ``compare``. The
        main run goes on alone. Returns the closed branch (None when no fork is open)."""
        self._check_idle("close_fork")
        b = self.fork_branch
        if b is None or b.closed:
            return None
        b.closed, b.pending = True, {}
        self.on_change()
        return b

    def _step_fork(self) -> None:
        """One step of the open fork, with the main branch put back after it, whatever happens."""
        b = self.fork_branch
        if b is None or b.closed:
            return
        t = self.trainer
        main = points.take(t, len(self.changes))
        try:
            points.put(t, b.point)
            with self._lock:
                changes, b.pending = b.pending, {}
            if changes:
                before = {k: t.knob(k) for k in changes}
                t.reconfigure(**changes)
                b.changes += [fork_mod.Change(k, before[k], t.knob(k), t.step_count + 1) for k in changes
                              if before[k] != t.knob(k)]
            t.step()
            b.point = points.take(t)
        finally:
            points.put(t, main)

    def in_branch(self, branch: str, fn):
        """``fn(trainer)`` with ``branch`` ("main" or "fork", open or closed) put in the trainer (paused only); the
        main run is put back after. What ``compare`` evaluates held-out pass@1 with."""
        self._check_idle("in_branch")
        if branch == "main":
            return fn(self.trainer)
        if branch != "fork" or self.fork_branch is None:
            raise ValueError(f"branch: expected 'main' or 'fork' (after lab.fork()), got {branch!r}")
        t = self.trainer
        main = points.take(t, len(self.changes))
        try:
            points.put(t, self.fork_branch.point)
            return fn(t)
        finally:
            points.put(t, main)

    def labels(self) -> tuple[str, str] | None:
        """(main, fork) legend labels, by what differs: ("beta 0", "beta 0.05 from step 30"); None without a fork."""
        b = self.fork_branch
        if b is None:
            return None
        fork_recipe = b.recipe.replace(**b.pending) if b.pending else b.recipe
        return fork_mod.labels(self.trainer.recipe, fork_recipe, b.since)

    def _fork_status(self) -> list[str]:
        b = self.fork_branch
        if b is None or b.closed:
            return []
        parts = [f"fork: {self.labels()[1]}"]
        if b.pending:
            parts.append("fork's next step: " + ", ".join(f"{k}={v!r}" for k, v in b.pending.items()))
        return parts
