"""The update's forward and backward on a CPU as row parts on parallel threads, each part on one intra-op thread.

On a CPU torch parallelises inside each operator (OpenMP): the operator's work is cut between the threads, which
then wait for the next operator. rlnb's threads wait passively (``rlnb/__init__``: spinning waits take a busy
laptop's cores from the work), so every operator first wakes the other threads, and the update of the embedded
default is thousands of small operators. Cutting the batch instead, each part a whole forward and backward on its
own thread with one intra-op thread, needs no wake-up at all: the parts synchronise twice per update, not twice
per operator.

How it computes the same gradient: each part's log-probs (and entropy, values, top-K log-probs) are computed
by its own forward and concatenated, so the loss is the loss of the whole batch, whatever its aggregation reads
across rows (group means, token means over the batch). ``backward`` first takes the loss's gradient with
respect to each part's outputs (the loss's few operators, on the calling thread), then runs each part's backward
from those on its own thread to the weights, and adds the parts' weight gradients in a fixed order. Only the
order of that last sum and the parts' shapes differ from one call over the batch: the same numbers to rounding
(tests compare them with ``ForwardOptions(rows="whole")``, the one-call reference). The parts are fixed by the
batch's shape and the thread count, never by the machine's load, so a run's numbers do not depend on how busy
the machine was.

Measured on the benchmark's 2-core machine (AMD EPYC, passive waits, the embedded default's GRPO batch of 128
rows, forward and backward with entropy, median of 6): 0.30 s in one call on two threads, 0.28 s on one thread,
0.20 s as two parts on one thread each. ``python -m rlnb.bench rows`` times whole steps both ways side by side
(``docs/bench_rows.txt``).

It applies on a CPU with at least two torch threads when the batch has at least two groups, no autocast is
entered around the call (a thread does not inherit it) and no module or weight carries a hook (a hook would see
each part, from another thread); otherwise the forward is one call, as ``rows="whole"`` asks.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from concurrent.futures import ThreadPoolExecutor

import torch

PARTS = 2  # parts per update on a CPU with >= 2 threads (measured on 2 cores; more parts pay more Python per row)
POOL_NAME = "rlnb-rows"


@functools.cache
def _pool() -> ThreadPoolExecutor:
    """The parts' threads, made on first use (the calling thread runs the first part itself)."""
    return ThreadPoolExecutor(max_workers=PARTS - 1, thread_name_prefix=POOL_NAME)


def parts(model, B: int, group_size: int, device: torch.device, rows: str) -> list[torch.Tensor] | None:
    """Row indices of each part (whole groups of ``group_size`` rows), or None: one call over the batch."""
    groups = B // max(group_size, 1)
    if rows != "split" or device.type != "cpu" or torch.get_num_threads() < 2 or groups < PARTS \
            or B % group_size or torch.is_autocast_enabled("cpu") or not torch.is_grad_enabled() or _hooked(model):
        return None
    cut = torch.tensor_split(torch.arange(groups), PARTS)
    return [(g[:, None] * group_size + torch.arange(group_size)).flatten() for g in cut]


def _hooked(model) -> bool:
    return any(m._forward_hooks or m._forward_pre_hooks or m._backward_hooks or m._backward_pre_hooks
               for m in model.modules()) or any(p._backward_hooks for p in model.parameters())


@contextlib.contextmanager
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _in_worker(fn, *args):
    """``fn(*args)`` on a pool thread with one intra-op thread and gradients on (a thread starts with them on)."""
    torch.set_num_threads(1)  # per thread under OpenMP: set on every task, so nothing else can have changed it
    return fn(*args)


def run(fn, items: list) -> list:
    """``[fn(x) for x in items]`` with the first on this thread and the rest on the pool, all at once, each on
    one intra-op thread; the first error raised is raised here after every part has finished. Called from a part
    (the pool's own thread), it runs the items in turn: the pool would otherwise wait for itself."""
    if threading.current_thread().name.startswith(POOL_NAME):
        return [fn(x) for x in items]
    with _one_thread():
        futures = [_pool().submit(_in_worker, fn, x) for x in items[1:]]
        first, error = None, None
        try:
            first = fn(items[0])
        except BaseException as e:  # noqa: BLE001  wait for the other parts before raising (they hold the weights)
            error = e
        rest = []
        for f in futures:
            try:
                rest.append(f.result())
            except BaseException as e:  # noqa: BLE001
                error = error or e
        if error is not None:
            raise error
    return [first, *rest]


def differentiable(out) -> list[torch.Tensor]:
    """The tensors of one part's output (a NamedTuple) that carry a gradient."""
    return [t for t in out if isinstance(t, torch.Tensor) and t.requires_grad]


def backward(total: torch.Tensor, part_outs: list, params: list[torch.Tensor]) -> None:
    """``total.backward()`` for a loss built from ``part_outs`` (each part's forward output): the loss's gradient
    with respect to the parts' outputs here, each part's backward on its own thread, then ``params``' ``.grad``
    (None before) = the parts' gradients summed in part order."""
    outs = [differentiable(o) for o in part_outs]
    flat = [t for o in outs for t in o]
    grads = list(torch.autograd.grad(total, flat, allow_unused=True))  # through the loss only: a few operators
    per_part, i = [], 0
    for o in outs:
        pairs = [(t, g) for t, g in zip(o, grads[i:i + len(o)]) if g is not None]
        per_part.append(pairs)
        i += len(o)

    def part_backward(pairs):
        if not pairs:
            return [None] * len(params)
        ts, gs = zip(*pairs)
        return torch.autograd.grad(ts, params, grad_outputs=gs, allow_unused=True)

    results = run(part_backward, per_part)
    for j, p in enumerate(params):
        got = [r[j] for r in results if r[j] is not None]
        if got:
            g = functools.reduce(torch.add, got)                       # in part order
            p.grad = g if p.grad is None else p.grad + g
