"""A fork of a lab's run: a second branch, copied bit-exact at a step boundary, with its own knobs.

The trainer holds one branch at a time: the lab steps the main branch, keeps it as a ``Point``, puts the fork's
point in, applies the fork's own knob changes, steps it, keeps it, and puts the main branch back. Same model,
same random streams and prompts from the fork step on, so a fork given the same knobs continues bit for bit like
the main run and the knobs are the only difference. Memory: one more copy of weights, optimizer and scheduler
(``cost``), refused up front where that copy does not fit (``check_fits``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlnb.run import points

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
