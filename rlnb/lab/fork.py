"""A fork of a lab's run: a second branch, copied bit-exact at a step boundary, with its own knobs.

The fork is a trainer of its own (``spawn``): a copy of the model, its own optimizer, stages, random streams and
task state, put at the fork's point; the tokenizer, the reference and the starting weights are shared (nothing
writes them). The lab steps the main run, then the fork's trainer; the trainer the notebook holds only ever holds
the main run, so ``trainer.history``, ``step_count`` and ``evaluate()`` read the main run whatever the fork does.
Same model, same random streams and prompts from the fork step on, so a fork given the same knobs continues bit
for bit like the main run and the knobs are the only difference. Memory: one more copy of weights, optimizer and
scheduler (``cost``), refused up front where that copy does not fit (``check_fits``).

``Forks`` is the lab's part that does this: it holds the open (or last closed) ``Branch`` and steps it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from rlnb.lab import points
from rlnb.lab.knobs import Queue, check_live
from rlnb.lab.timeline import apply_changes
from rlnb.models.pretrained import AdaptersOff
from rlnb.run.state import restore

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


def spawn(trainer, point: points.Point):
    """A trainer of its own running ``point`` of ``trainer``'s run: a copy of the model, a fresh optimizer, stages
    and random streams put where the point says, the task copied when it has a random state of its own (noise),
    the same constructor arguments and forward options. The tokenizer, the reference (a LoRA reference: the copy
    with its adapters off) and the starting weights are shared: nothing writes them."""
    t, model = trainer, copy.deepcopy(trainer.model)
    ref = AdaptersOff(model) if isinstance(point.ref, AdaptersOff) else point.ref
    task = copy.deepcopy(t.task, {id(t.tokenizer): t.tokenizer}) if t.task.state() is not None else t.task
    fork = type(t)(model, t.tokenizer, task, point.recipe, seed=t.seed, ref_model=ref, pool_size=t.pool_size,
                   keep_records=t.records.maxlen, safe_update=t.safe_update, reward_on_error=t.reward_on_error,
                   reward_time_limit=t.reward_time_limit, forward=t.forward_options)
    if hasattr(t, "model_options"):  # from_pretrained's autocast and checkpointing (the copy has them already)
        fork.model_options = dict(t.model_options)
    fork.forward_changes = list(t.forward_changes)
    restore(fork, point.snap)  # through Trainer.set_state; recipe and reference were given to the constructor
    fork.records.extend(point.records)
    return fork


@dataclass
class Branch:
    """The fork: ``since`` is the step it was copied at; ``trainer`` its own trainer (its run now), ``queue`` its
    queued knob changes (``pending``), ``changes`` what it applied (``Change`` records), ``closed`` once closed
    (then only read: ``history``, ``recipe``, ``trainer``)."""

    since: int
    trainer: object
    queue: Queue = field(default_factory=Queue)
    changes: list = field(default_factory=list)
    closed: bool = False

    @property
    def history(self) -> list[dict]:
        return self.trainer.history

    @property
    def pending(self) -> dict:
        return self.queue.pending

    @property
    def recipe(self):
        return self.trainer.recipe

    def __repr__(self) -> str:  # the trainer holds weights and random streams: pages of tensors
        knobs = ", ".join(f"{k}={v!r}" for k, v in self.pending.items())
        return (f"Branch(since={self.since}, step={self.trainer.step_count}, {'closed' if self.closed else 'open'}"
                + (f", next step: {knobs}" if knobs else "") + ")")


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
    ``queue`` (its own knob changes), ``step`` (one step of its own trainer), ``close``, ``in_branch``.
    Called between steps only, by the thread that owns the trainer; the main trainer is only read."""

    def __init__(self, trainer):
        self.trainer, self.branch = trainer, None

    def is_open(self) -> bool:
        return self.branch is not None and not self.branch.closed

    def trainers(self) -> list:
        """The open fork's trainer (the lab's thread drives it with the main one), or none."""
        return [self.branch.trainer] if self.is_open() else []

    def open(self, knobs: dict, changes: int = 0) -> tuple[Branch, points.Point]:
        """Copy the run now into a new branch with ``knobs`` applied to it at once; returns it and the point it
        was copied from (``changes``: the main run's lab changes so far). A knob refused as ``LabLoop.set``
        refuses it (the recipe, ``critic``, then the fork's trainer: ``max_new_tokens`` past the context) or a
        copy that does not fit (MemoryError) raises before anything changes."""
        if self.is_open():
            raise RuntimeError("fork: a fork is already open; close it first (lab.close_fork())")
        t = self.trainer
        check_live(t.recipe, knobs)
        check_fits(t)
        point = points.take(t, changes)
        branch = Branch(since=t.step_count, trainer=spawn(t, point))
        if knobs:
            branch.changes += apply_changes(branch.trainer, knobs)  # refused: the fork is dropped, nothing changed
        self.branch = branch
        return branch, point

    def queue(self, changes: dict) -> None:
        """Queue ``changes`` for the open fork's next step (checked with those already queued)."""
        if not self.is_open():
            raise RuntimeError("branch: no fork is open; lab.fork() first")
        self.branch.queue.add(self.branch.recipe, changes)

    def close(self) -> Branch | None:
        """Stop stepping the fork; its history and weights stay readable. None when none is open."""
        if not self.is_open():
            return None
        self.branch.closed = True
        self.branch.queue.clear()
        return self.branch

    def forget_after(self, step: int) -> None:
        """A rewind to ``step``: a closed fork copied later comes from a step that no longer happened."""
        if self.branch is not None and self.branch.since > step:
            self.branch = None

    def apply(self) -> Exception | None:
        """Apply the open fork's queued changes to its trainer now (between its steps); a combination its
        trainer refuses is dropped and returned (the fork goes on with the knobs it had)."""
        if not self.is_open():
            return None
        made, err = self.branch.queue.apply(self.branch.trainer)
        self.branch.changes += made
        return err

    def step(self) -> Exception | None:
        """One step of the open fork's own trainer, its queued changes applied first; returns the error a refused
        change was dropped with (the step runs with the knobs the fork had), or None."""
        if not self.is_open():
            return None
        err = self.apply()
        self.branch.trainer.step()
        return err

    def in_branch(self, name: str, fn):
        """``fn(trainer)`` on branch ``name``'s trainer ("main" or "fork", open or closed)."""
        if name == "main":
            return fn(self.trainer)
        if name != "fork" or self.branch is None:
            raise ValueError(f"branch: expected 'main' or 'fork' (after lab.fork()), got {name!r}")
        return fn(self.branch.trainer)

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
