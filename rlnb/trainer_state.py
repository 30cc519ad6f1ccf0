"""Trainer state that must survive errors, interrupts and restarts: rollback, deferred Ctrl-C, checkpoints."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import signal
import threading
import time
from pathlib import Path

import torch


@contextlib.contextmanager
def deferred_interrupt():
    """Hold Ctrl-C (SIGINT) until the block ends, then raise it: the update is applied whole or not at all."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    previous = signal.signal(signal.SIGINT, lambda *a: received.append(a))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received:
            raise KeyboardInterrupt


@contextlib.contextmanager
def own_global_stream(generator: torch.Generator | None, committed):
    """Run the block on ``generator``'s state as torch's global stream (what dropout draws from), and put
    the caller's global state back after it. The generator advances only if ``committed()`` says the step
    was recorded, so a failed step consumes nothing."""
    if generator is None:
        yield
        return
    cuda = generator.device.type == "cuda"
    with torch.random.fork_rng(devices=[generator.device] if cuda else [], device_type="cuda"):
        (torch.cuda.set_rng_state(generator.get_state(), generator.device) if cuda
         else torch.set_rng_state(generator.get_state()))
        try:
            yield
        finally:
            if committed():
                generator.set_state(torch.cuda.get_rng_state(generator.device) if cuda else torch.get_rng_state())


def uses_dropout(model) -> bool:
    """Whether any part of ``model`` draws dropout masks (an ``nn.Dropout`` with p > 0, or a Hugging Face
    attention module with ``attention_dropout`` > 0). Only then does a step borrow torch's global
    generator: a model without dropout (the default) leaves the global random state alone entirely."""
    for m in model.modules():
        p = m.p if isinstance(m, torch.nn.modules.dropout._DropoutNd) else getattr(m, "attention_dropout", 0.0)
        if isinstance(p, (int, float)) and p > 0:
            return True
    return False


class Timer:
    """Wall time per stage, summed over a step, as ``timing/<stage>_s`` metrics."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, stage: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - t0

    def metrics(self) -> dict[str, float]:
        return {f"timing/{k}_s": round(v, 4) for k, v in self.seconds.items()}


def hash_seed(seed: int, name: str) -> int:
    """A stable 63-bit seed for one named random stream (Python's hash() is salted per process)."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:8], "little") >> 1


class TrainerStateMixin:
    """Rollback on error, ``run`` with a clean stop, and ``save``/``load`` for exact resumption."""

    # --- rollback -----------------------------------------------------------------------------
    safe_update: bool = True  # snapshot weights and optimizer each step so a failed update is undone

    def _rng_state(self) -> dict:
        return {k: g.get_state() for k, g in self.generators.items()}

    def _modules(self) -> list:
        return [self.model] + ([self.value_head] if self.value_head is not None else [])

    def _snapshot(self) -> dict:
        """Everything a step may change before it commits. Weights, optimizer and scheduler only with
        ``safe_update`` (about 3x the model's size in memory; cheap for the default model)."""
        snap = {"rng": self._rng_state(), "steps": self.step_count, "drawn": self.prompts_drawn,
                "pass_rates": copy.deepcopy(self.pass_rates), "controllers": [c.state() for c in self.controllers],
                "reward_errors": self.rewarder.errors, "training": self.model.training, "task": self.task.state()}
        if self.safe_update:
            snap["weights"] = [{k: v.detach().clone() for k, v in m.state_dict().items()} for m in self._modules()]
            snap["optimizer"] = copy.deepcopy(self.optimizer.state_dict())
            snap["scheduler"] = copy.deepcopy(self.scheduler.state_dict())
        return snap

    def _restore(self, snap: dict) -> None:
        for k, state in snap["rng"].items():
            self.generators[k].set_state(state)
        self.prompts_drawn, self.pass_rates = snap["drawn"], snap["pass_rates"]
        for ctl, value in zip(self.controllers, snap["controllers"]):
            ctl.set(value)
        self.rewarder.errors = snap["reward_errors"]
        self.task.set_state(snap["task"])
        if "weights" in snap:
            for module, weights in zip(self._modules(), snap["weights"]):
                module.load_state_dict(weights)
            self.optimizer.load_state_dict(snap["optimizer"])
            self.scheduler.load_state_dict(snap["scheduler"])
            self.optimizer.zero_grad(set_to_none=True)
        self.model.train(snap["training"])

    @contextlib.contextmanager
    def rollback_on_error(self):
        """If the step fails (or is interrupted) before it commits, put back everything it changed:
        random streams (the task's own too), prompt cursor, pass rates, controllers and, with
        ``safe_update``, the weights, optimizer and scheduler (an update that failed after some of its
        mini-batches is undone too). For a model with dropout, torch's global generator runs on the
        trainer's own "dropout" stream inside the step, so the caller's global random state is left alone
        and the masks are part of the run (saved, rolled back)."""
        snap = self._snapshot()
        try:
            dropout = self.generators.get("dropout") if uses_dropout(self.model) else None
            with own_global_stream(dropout, lambda: self.step_count != snap["steps"]):
                yield
        except BaseException:
            if self.step_count == snap["steps"]:  # the step did not commit
                with deferred_interrupt():  # a second Ctrl-C must not leave a half-restored trainer
                    self._restore(snap)
            raise

    # --- run ----------------------------------------------------------------------------------
    def run(self, steps: int | None = None, *, callbacks=(), progress: bool = True) -> list[dict]:
        """Train ``steps`` more steps. After a KeyboardInterrupt, ``run()`` with no argument finishes the
        interrupted run. Each callback is called as ``cb(trainer, record)`` after every step; a callback
        with a method ``on_stage(trainer, stage, batch)`` is also called inside the step, after each stage
        ("sample", "reward", "advantage", "update"; the step commits after "update"). An error or
        KeyboardInterrupt inside a step leaves the trainer as it was before that step.
        Returns ``self.history``."""
        from tqdm.auto import tqdm

        callbacks = _check_callbacks(callbacks)
        if steps is not None:
            if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
                raise ValueError(f"steps: expected a non-negative int, got {steps!r}")
            self._run_target = self.step_count + steps
        elif self._run_target is None:
            raise ValueError("steps: expected a number of steps (there is no interrupted run to finish)")
        target = self._run_target
        hooks = [cb for cb in callbacks if hasattr(cb, "on_stage")]
        bar = tqdm(total=target, initial=self.step_count, disable=not progress, desc=f"{self.recipe.name}")
        notified = self.step_count  # the last step every callback has seen
        try:
            while self.step_count < target:
                self._called = 0  # callbacks called (or running) for the newest step
                record = self.step(callbacks=hooks)
                bar.update(1)
                bar.set_postfix(reward=f"{record.metrics['reward']:.3f}", refresh=False)
                notified = self._notify(callbacks, record)
            self._run_target = None
        except KeyboardInterrupt:
            if self.step_count > notified and self.records:
                # Ctrl-C held during an update fires after the step is recorded, and a callback may itself
                # stop the run: the callbacks that have not yet seen that step see it now, once each.
                with contextlib.suppress(KeyboardInterrupt):
                    self._notify(callbacks[self._called:], self.records[-1])
            print(f"Interrupted after step {self.step_count}; state is intact. Call run() to finish "
                  f"the remaining {target - self.step_count} steps.")
        finally:
            bar.close()
        return self.history

    def _notify(self, callbacks, record) -> int:
        for cb in callbacks:
            self._called += 1
            if callable(cb):
                cb(self, record)
        return self.step_count

    # --- checkpoints --------------------------------------------------------------------------
    def save(self, directory) -> Path:
        """Everything that defines the run and where it stands, written atomically (``rlnb.checkpoint``):
        model, reference, optimizer, scheduler, every random stream, recipe, task with its parameters and
        its own random state, constructor arguments, prompt cursor, controllers, pass rates, history.
        Refuses a ``directory`` that is a file or a folder holding anything but an rlnb checkpoint."""
        from rlnb.checkpoint import save

        return save(self, directory)

    @classmethod
    def load(cls, directory, *, task=None, device=None, **options):
        """A trainer that continues exactly where ``save`` left off: ``run(a)`` + save + load + ``run(b)``
        gives the history and weights of ``run(a + b)``, bit for bit.

        ``options`` may change ``keep_records``, ``safe_update`` and ``reward_on_error``, and recipe knobs
        (``lr=1e-2``): those are applied with ``reconfigure`` once the run is restored, so the recipe, the
        optimizer's param groups and the schedule agree (``load(d, lr=x)`` continues exactly like
        ``reconfigure(lr=x)`` at that step would have). ``seed``, ``pool_size``, ``recipe`` and ``ref_model``
        would make it another run: refused by name (unless equal to the saved value). ``task`` supplies a task
        the checkpoint cannot rebuild by itself (a custom class): it must match the saved one. ``device``
        defaults to the saved one (another device type continues with fresh sampling streams: not bit-exact)."""
        from rlnb.checkpoint import load

        return load(cls, directory, task=task, device=device, **options)


def check_hooks(callbacks) -> list:
    """``Trainer.step(callbacks=...)``: objects with ``on_stage(trainer, stage, batch)``."""
    callbacks = [callbacks] if hasattr(callbacks, "on_stage") else callbacks
    try:
        callbacks = list(callbacks)
    except TypeError:
        raise TypeError(f"callbacks: expected a list of objects with on_stage(trainer, stage, batch), "
                        f"got {callbacks!r}") from None
    for i, cb in enumerate(callbacks):
        if not callable(getattr(cb, "on_stage", None)):
            raise TypeError(f"callbacks[{i}]: expected an object with on_stage(trainer, stage, batch), got {cb!r}")
    return callbacks


def _check_callbacks(callbacks) -> list:
    if callable(callbacks) or hasattr(callbacks, "on_stage"):
        callbacks = [callbacks]
    try:
        callbacks = list(callbacks)
    except TypeError:
        raise TypeError(f"callbacks: expected a list of callables, got {callbacks!r}") from None
    for i, cb in enumerate(callbacks):
        if not callable(cb) and not callable(getattr(cb, "on_stage", None)):
            raise TypeError(f"callbacks[{i}]: expected a callable cb(trainer, record) or an object with "
                            f"on_stage(trainer, stage, batch), got {cb!r}")
    return callbacks
