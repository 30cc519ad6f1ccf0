"""A fork of a lab's run: a second branch, copied bit-exact at a step boundary, with its own knobs.

The trainer holds one branch at a time: the lab steps the main branch, keeps it as a ``Point``, puts the fork's
point in, applies the fork's own knob changes, steps it, keeps it, and puts the main branch back. Same model,
same random streams and prompts from the fork step on, so a fork given the same knobs continues bit for bit like
the main run and the knobs are the only difference. Memory: one more copy of weights, optimizer and scheduler
(``cost``), refused up front where that copy does not fit (``check_fits``).

``Forks`` is the lab's part that does this: it holds the open (or last closed) ``Branch`` and steps it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from rlnb.lab import points
from rlnb.lab.timeline import apply_changes

FIT_SHARE = 0.5  # a fork may take at most this share of the memory free now (the run itself must still grow)


def cost(trainer) -> int:
    """Bytes a fork holds: a copy of the trainable weights and of the optimizer and scheduler state. Before the
    first update Adam holds no moments yet; they are counted anyway (two per trainable weight), since the fork
    has them after its first step."""
    w = sum(p.numel() * p.element_size() for m in trainer.modules() for p in m.state_dict().values())
    opt = points.tensor_bytes(trainer.optimizer.state_dict())
    if "betas" in trainer.optimizer.param_groups[0]:  # Adam-like: exp_avg and exp_avg_sq per trainable weight
        trainable = sum(p.numel() * p.element_size() for g in trainer.optimizer.param_groups for p in g["params"])
        opt = max(opt, 2 * trainable)
    return w + opt + points.tensor_bytes(trainer.scheduler.state_dict())


def check_fits(trainer, free: int | None = None) -> int:
    """Raise MemoryError naming the sizes when a fork of ``trainer`` would take more than ``FIT_SHARE`` of the
    memory free on the model's device; returns the fork's cost in bytes."""
    need = cost(trainer)
    device = next(trainer.model.parameters()).device
    free = points.free_bytes(device) if free is None else free
    if need > FIT_SHARE * free:
        raise MemoryError(f"fork: this model is too big to copy here: a fork holds {need / 2**20:,.0f} MiB (weights, "
                          f"optimizer, scheduler) and {device} has {free / 2**20:,.0f} MiB free (a fork may take "
                          f"{FIT_SHARE:.0%}); compare two runs from one checkpoint instead (Trainer.save / load)")
    return need


@dataclass
class Branch:
    """The fork: ``since`` is the step it was copied at; ``point`` its run now (between steps), ``pending`` its
    queued knob changes, ``changes`` what it applied (``Change`` records), ``closed`` once closed (then only
    read: ``history``, ``recipe``)."""

    since: int
    point: points.Point
    pending: dict = field(default_factory=dict)
    changes: list = field(default_factory=list)
    closed: bool = False

    @property
    def history(self) -> list[dict]:
        return self.point.history

    def __repr__(self) -> str:  # the point holds weights and random streams: pages of tensors
        knobs = ", ".join(f"{k}={v!r}" for k, v in self.pending.items())
        return (f"Branch(since={self.since}, step={self.point.step}, {'closed' if self.closed else 'open'}"
                + (f", next step: {knobs}" if knobs else "") + ")")

    @property
    def recipe(self):
        return self.point.recipe


def _fmt(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def differs(main, fork) -> dict:
    """``{knob: (main value, fork value)}`` for the knobs the two recipes set differently."""
    return {k: (getattr(main, k), getattr(fork, k)) for k in type(main).knobs()
            if getattr(main, k) != getattr(fork, k)}


def labels(main, fork, since: int) -> tuple[str, str]:
    """What tells the two branches apart, for legends: ``("beta 0", "beta 0.05 from step 30")``.

    >>> from rlnb import recipes
    >>> labels(recipes.get("grpo"), recipes.get("grpo", beta=0.05), 30)
    ('beta 0', 'beta 0.05 from step 30')
    >>> labels(recipes.get("grpo"), recipes.get("grpo"), 4)
    ('main', 'fork from step 4 (same knobs)')
    """
    d = differs(main, fork)
    if not d:
        return "main", f"fork from step {since} (same knobs)"
    main_text = ", ".join(f"{k} {_fmt(a)}" for k, (a, _) in d.items())
    fork_text = ", ".join(f"{k} {_fmt(b)}" for k, (_, b) in d.items())
    return main_text, f"{fork_text} from step {since}"


class Forks:
    """The fork of one lab's trainer: ``branch`` (the open or last closed ``Branch``, or None), ``open``,
    ``queue`` (its own knob changes), ``step`` (one step of it, the main branch put back), ``close``, ``in_branch``.
    Called between steps only, by the thread that owns the trainer."""

    def __init__(self, trainer):
        self.trainer, self.branch = trainer, None
        self._lock = threading.Lock()  # the panel queues fork knobs while the playing thread applies them

    def is_open(self) -> bool:
        return self.branch is not None and not self.branch.closed

    def open(self, knobs: dict) -> Branch:
        """Copy the run now into a new branch with ``knobs`` queued for its first step (raises naming a bad knob,
        or MemoryError where the copy does not fit, before anything changes)."""
        if self.is_open():
            raise RuntimeError("fork: a fork is already open; close it first (lab.close_fork())")
        check_fits(self.trainer)
        t = self.trainer
        t.recipe.replace(**knobs)
        self.branch = Branch(since=t.step_count, point=points.take(t, 0), pending=dict(knobs))
        return self.branch

    def queue(self, changes: dict) -> None:
        """Queue ``changes`` for the open fork's next step (validated with those already queued)."""
        b = self.branch
        if not self.is_open():
            raise RuntimeError("branch: no fork is open; lab.fork() first")
        with self._lock:
            trial = {**b.pending, **changes}
            b.recipe.replace(**trial)
            b.pending = trial

    def close(self) -> Branch | None:
        """Stop stepping the fork; its history and weights stay readable. None when none is open."""
        if not self.is_open():
            return None
        self.branch.closed, self.branch.pending = True, {}
        return self.branch

    def forget_after(self, step: int) -> None:
        """A rewind to ``step``: a closed fork copied later comes from a step that no longer happened."""
        if self.branch is not None and self.branch.since > step:
            self.branch = None

    def step(self, main_changes: int) -> None:
        """One step of the open fork, with the main branch (``main_changes`` lab changes so far) put back after
        it, whatever happens."""
        b = self.branch
        if not self.is_open():
            return
        t = self.trainer
        main = points.take(t, main_changes)
        try:
            points.put(t, b.point)
            with self._lock:
                changes, b.pending = b.pending, {}
            if changes:
                b.changes += apply_changes(t, changes)
            t.step()
            b.point = points.take(t)
        finally:
            points.put(t, main)

    def in_branch(self, name: str, fn, main_changes: int):
        """``fn(trainer)`` with branch ``name`` ("main" or "fork", open or closed) put in; main put back after."""
        if name == "main":
            return fn(self.trainer)
        if name != "fork" or self.branch is None:
            raise ValueError(f"branch: expected 'main' or 'fork' (after lab.fork()), got {name!r}")
        t = self.trainer
        main = points.take(t, main_changes)
        try:
            points.put(t, self.branch.point)
            return fn(t)
        finally:
            points.put(t, main)

    def labels(self) -> tuple[str, str] | None:
        """(main, fork) legend labels, by what differs; None without a fork."""
        b = self.branch
        if b is None:
            return None
        fork_recipe = b.recipe.replace(**b.pending) if b.pending else b.recipe
        return labels(self.trainer.recipe, fork_recipe, b.since)

    def status(self) -> list[str]:
        """The fork's part of the lab's status line."""
        if not self.is_open():
            return []
        parts = [f"fork: {self.labels()[1]}"]
        if self.branch.pending:
            parts.append("fork's next step: " + ", ".join(f"{k}={v!r}" for k, v in self.branch.pending.items()))
        return parts


COMPARED = ("reward", "accuracy", "entropy", "kl", "clip_ratio/region_mean")  # compare()'s columns
LAST = 5  # compare() averages the last this many steps (one step's batch is noisy)


def compare(loop, n: int = 64):
    """A pandas table: one row per branch of ``loop`` (labelled by what differs), the mean of the last ``LAST``
    steps since the fork of each metric in ``COMPARED`` and held-out greedy pass@1 on ``n`` prompts as
    ``eval/pass@1`` (evaluated now; paused only). Columns are metric keys; the panel shows their labels."""
    import pandas as pd

    b = loop.fork_branch
    if b is None:
        raise RuntimeError("compare: no fork yet; lab.fork() first")
    rows = {}
    for name, label, hist in zip(("main", "fork"), loop.labels(), (loop.trainer.history, b.history)):
        tail = hist[b.since:][-LAST:] or hist[-1:]  # the steps the branches differ in
        row = {"last step": tail[-1]["step"] if tail else 0}
        row |= {k: sum(h[k] for h in tail) / len(tail) for k in COMPARED if tail and k in tail[0]}
        row["eval/pass@1"] = loop.in_branch(name, lambda t: t.evaluate(n)["pass@1"])
        rows[f"{name}: {label}"] = row
    return pd.DataFrame.from_dict(rows, orient="index").round(3)
