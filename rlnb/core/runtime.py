"""Runtime helpers of a step: deferred Ctrl-C, the dropout stream, stage timing, named seeds, callback checks.

A leaf: imports nothing else from rlnb (the run's state itself is ``rlnb.run.state``)."""

from __future__ import annotations

import contextlib
import hashlib
import signal
import statistics
import threading
import time

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


def check_callbacks(callbacks) -> list:
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


def median_step_seconds(trainer, steps: int, *, warmup: int = 0) -> float:
    """The median wall time of ``steps`` calls of ``trainer.step()`` after ``warmup`` untimed ones (a median, so
    that one step's one-off costs do not count)."""
    for _ in range(warmup):
        trainer.step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        trainer.step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)
