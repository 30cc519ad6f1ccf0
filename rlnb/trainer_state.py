"""Trainer state that must survive errors, interrupts and restarts: rollback, deferred Ctrl-C, checkpoints."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import shutil
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
                "reward_errors": self.rewarder.errors, "training": self.model.training}
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
        random streams, prompt cursor, pass rates, controllers and, with ``safe_update``, the weights,
        optimizer and scheduler (an update that failed after some of its mini-batches is undone too)."""
        snap = self._snapshot()
        try:
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
        """Model, tokenizer, optimizer, scheduler, random streams, history and recipe, written atomically
        (into a temporary folder that is then renamed over ``directory``)."""
        directory = Path(directory)
        tmp = directory.with_name(directory.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        from rlnb.models.tiny import quiet_progress

        with quiet_progress():
            self.model.save_pretrained(tmp / "model", safe_serialization=True)
            if self.ref_model is not None:  # the reference is the starting policy, not the current one
                self.ref_model.save_pretrained(tmp / "reference", safe_serialization=True)
        self.tokenizer.save_pretrained(tmp / "model")
        torch.save({"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                    "rng": self._rng_state(),
                    "value_head": None if self.value_head is None else self.value_head.state_dict()}, tmp / "state.pt")
        meta = {"recipe": self.recipe.to_dict(), "task": self.task.name, "seed": self.seed,
                "step_count": self.step_count, "prompts_drawn": self.prompts_drawn, "run_target": self._run_target,
                "reward_on_error": getattr(self, "reward_on_error", "raise"),
                "controllers": [c.state() for c in self.controllers],
                "pass_rates": None if self.pass_rates is None else self.pass_rates.state_dict()}
        (tmp / "trainer.json").write_text(json.dumps(meta, indent=1))
        (tmp / "history.jsonl").write_text("".join(json.dumps(h) + "\n" for h in self.history))
        old = directory.with_name(directory.name + ".old")
        with deferred_interrupt():  # killed between the renames, load() falls back to <dir>.old
            if directory.exists():  # only then is a leftover <dir>.old stale
                shutil.rmtree(old, ignore_errors=True)
                os.replace(directory, old)
            os.replace(tmp, directory)
        shutil.rmtree(old, ignore_errors=True)
        return directory

    @classmethod
    def load(cls, directory, **kwargs):
        """A trainer that continues exactly where ``save`` left off."""
        from rlnb.models import load as load_model
        from rlnb.recipe import Recipe

        directory = Path(directory)
        old = directory.with_name(directory.name + ".old")
        if not (directory / "trainer.json").exists() and (old / "trainer.json").exists():
            directory = old  # a save was killed between its two renames: the previous checkpoint is whole
        if not (directory / "trainer.json").exists():
            raise FileNotFoundError(f"directory: no rlnb checkpoint (trainer.json) in {directory}")
        meta = json.loads((directory / "trainer.json").read_text())
        model, tokenizer = load_model(directory / "model")
        kwargs.setdefault("reward_on_error", meta.get("reward_on_error", "raise"))
        trainer = cls(model, tokenizer, meta["task"], Recipe(**meta["recipe"]), seed=meta["seed"], **kwargs)
        if trainer.ref_model is not None and (directory / "reference").exists():
            from transformers import AutoModelForCausalLM  # weights only: the tokenizer lives in model/

            ref = AutoModelForCausalLM.from_pretrained(directory / "reference", dtype=model.dtype, use_safetensors=True)
            trainer.ref_model = ref.to(model.device).eval().requires_grad_(False)
            trainer.sampler.ref_model = trainer.ref_model
        state = torch.load(directory / "state.pt", weights_only=True)
        trainer.optimizer.load_state_dict(state["optimizer"])
        trainer.scheduler.load_state_dict(state["scheduler"])
        for k, s in state["rng"].items():
            trainer.generators[k].set_state(s)
        if state["value_head"] is not None:
            trainer.value_head.load_state_dict(state["value_head"])
        trainer.step_count, trainer._run_target = meta["step_count"], meta["run_target"]
        trainer.prompts_drawn = meta["prompts_drawn"]
        for ctl, value in zip(trainer.controllers, meta["controllers"]):
            ctl.set(value)
        if meta["pass_rates"] is not None:
            trainer.pass_rates.load_state_dict(meta["pass_rates"])
        lines = (directory / "history.jsonl").read_text().splitlines()
        trainer.history = [json.loads(line) for line in lines if line.strip()]
        return trainer


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
