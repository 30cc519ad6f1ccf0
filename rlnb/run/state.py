"""``RunState``: everything a run is besides its model weights, optimizer and scheduler, in one place.

``Trainer.state()`` returns one and ``Trainer.set_state(s)`` applies one; they are the only code that reads or
writes those attributes of the trainer. Everything that must put a run back where it was is built on them:

- the step rollback (``rollback_on_error``: a step that raises or is interrupted changes nothing),
- checkpoints (``rlnb.run.checkpoint``: the state as JSON, the random streams in ``state.pt``),
- the lab's rewind (``rlnb.lab.points``: a ``Snapshot`` kept in memory).

Adding a piece of run state means adding a field here and one line each in ``state``/``set_state``;
``tests/test_run_state.py`` fails when a step changes an attribute that is neither here nor in ``DERIVED``.
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass, field

import torch

from rlnb.core.runtime import deferred_interrupt, own_global_stream, uses_dropout

# Trainer and stage attributes that change during a step but are not run state: views and caches rebuilt
# from the state (name -> why). The run-state test allows exactly these.
DERIVED = {
    "records": "the last StepRecords, kept for widgets to scrub back through (views of history)",
    "_perm_cache": "the current epoch's prompt permutation, recomputed from the seed and prompts_drawn",
    "zero_std_per_round": "the last step's per-round zero-variance shares (a metric of that step)",
    "recompute_old_logp": "a per-step switch of the Sampler, reset when the step ends",
    "sampled_tokens": "VinePPO's running count of continuation tokens (a cost statistic, not replayed)",
}


@dataclass
class RunState:
    """Where a run stands. Plain data: numbers, lists, dicts and tensors (the random streams' states)."""

    step: int                                   # steps committed to history
    prompts_drawn: int                          # cursor into the training pool's permutations
    run_target: int | None                      # the step an interrupted run() finishes at
    rng: dict[str, torch.Tensor]                # name -> torch.Generator state ("sample", "update", "dropout")
    pass_rates: dict | None                     # no-positive-resampling's per-prompt counts (state_dict)
    controllers: list = field(default_factory=list)   # each controller's value (adaptive beta, thermostat)
    reward_errors: int = 0                      # rewards scored 0 under reward_on_error="zero"
    task_state: dict | None = None              # the task's own random stream (noisy rewards)
    logged_knobs: tuple[str, ...] = ()          # knobs written to every step's metrics as hp/<name>
    training: bool = False                      # the model's train/eval mode
    history: list[dict] = field(default_factory=list)  # one dict of metrics per committed step
    start_weights: dict | None = None           # the weights the run started from (a reference for beta later);
    #                                             shared, never modified in place

    def meta(self) -> dict:
        """The JSON-friendly part (everything but ``rng``, ``history`` and ``start_weights``, which
        checkpoints store in files of their own)."""
        return {"step_count": self.step, "prompts_drawn": self.prompts_drawn, "run_target": self.run_target,
                "reward_errors": self.reward_errors, "controllers": list(self.controllers),
                "pass_rates": self.pass_rates, "task_state": self.task_state, "logged_knobs": list(self.logged_knobs),
                "training": self.training}


@dataclass
class Snapshot:
    """A ``RunState`` with (optionally) copies of the weights, optimizer and scheduler: enough to put a run
    back exactly. About 3x the model's size in memory with weights; cheap for the default model."""

    state: RunState
    weights: list[dict] | None = None           # state_dict of each trainable module (policy, value head)
    optimizer: dict | None = None
    scheduler: dict | None = None


def snapshot(trainer, *, weights: bool) -> Snapshot:
    """The trainer's state now, with copies of weights, optimizer and scheduler when ``weights``."""
    snap = Snapshot(trainer.state())
    if weights:
        snap.weights = [clone_tree({k: v.detach() for k, v in m.state_dict().items()}) for m in trainer.modules()]
        snap.optimizer = clone_tree(trainer.optimizer.state_dict())
        snap.scheduler = copy.deepcopy(trainer.scheduler.state_dict())
    return snap


def clone_tree(src):
    """A deep copy of ``src`` (dicts, lists and tuples of tensors and plain values), each tensor cloned. The step
    rollback takes a snapshot with weights every step: with ``copy.deepcopy`` of the optimizer's state it took
    7-9 ms of the default's step, with this 2-4 ms (measured on 2 cores)."""
    if isinstance(src, torch.Tensor):
        return src.detach().clone()
    if isinstance(src, dict):
        return {k: clone_tree(v) for k, v in src.items()}
    if type(src) in (list, tuple):
        return type(src)(clone_tree(v) for v in src)
    return copy.deepcopy(src)


def restore(trainer, snap: Snapshot) -> None:
    """Put ``trainer`` back to ``snap`` (the snapshot itself is left intact, so it can be restored again)."""
    trainer.set_state(copy.copy(snap.state))
    if snap.weights is not None:
        for module, weights in zip(trainer.modules(), snap.weights):
            module.load_state_dict(weights)
        trainer.optimizer.load_state_dict(copy.deepcopy(snap.optimizer))
        trainer.scheduler.load_state_dict(copy.deepcopy(snap.scheduler))
        trainer.optimizer.zero_grad(set_to_none=True)


@contextlib.contextmanager
def rollback_on_error(trainer):
    """If the step fails (or is interrupted) before it commits, put back everything it changed: the
    ``RunState`` (random streams, the task's too, prompt cursor, pass rates, controllers) and, with
    ``trainer.safe_update``, the weights, optimizer and scheduler (an update that failed after some of its
    mini-batches is undone too). For a model with dropout, torch's global generator runs on the trainer's
    own "dropout" stream inside the step, so the caller's global random state is left alone and the masks
    are part of the run (saved, rolled back)."""
    snap = snapshot(trainer, weights=trainer.safe_update)
    try:
        dropout = trainer.generators.get("dropout") if uses_dropout(trainer.model) else None
        with own_global_stream(dropout, lambda: trainer.step_count != snap.state.step):
            yield
    except BaseException:
        if trainer.step_count == snap.state.step:  # the step did not commit
            with deferred_interrupt():  # a second Ctrl-C must not leave a half-restored trainer
                restore(trainer, snap)
        raise
