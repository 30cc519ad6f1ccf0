"""How many CPU threads a decode uses: one, where its matmuls are too small for a second thread to pay.

rlnb's OpenMP threads wait passively between parallel operators (``rlnb/__init__``: spinning waits take a busy
laptop's cores from the work), so each parallel operator first wakes the other threads, and a wake-up costs about
what a small matmul computes. A decode step of the embedded default (128 rows, hidden 128, MLP 512) is a hundred
operators of that size: on two threads it spends more on wake-ups than the second thread computes.

Measured on the benchmark's 2-core machine (AMD EPYC, passive waits, GRPO at 16 prompts x 8 from a random model
of each shape, median of 6 steps, two runs each): sampling took 0.26-0.28 s on one thread against 0.35-0.38 s on two for the default's
shape; at hidden 256 (MLP 1024) the two were even (0.64 against 0.57-0.74 s), at hidden 512 (MLP 2048) two threads
won (1.41 against 1.91-2.03 s). The training update was even at the default's shape and faster on two threads above
it, so only the decode takes the rule.

Where the decode's rows run as parallel parts (``rlnb.models.split_decode``: two or more torch threads, the default
``ForwardOptions.rows``), each part runs on one thread anyway; the rule then decides the prefill's threads.

The rule reads the model's shapes and the batch's rows only, never the machine's load or a timing: the thread count
changes a matmul's rounding, and a run's numbers must not depend on how busy the machine was.

With spinning waits (``GOMP_SPINCOUNT``, for a machine that runs nothing else: ``python -m rlnb.bench waits``) a
thread is rarely asleep when the next operator comes, and two threads decode faster than one: the rule then keeps
torch's setting. The environment is read once, when this module loads, as the OpenMP runtime read it when torch
loaded.
"""

from __future__ import annotations

import contextlib
import os

import torch

from rlnb.core.waits import spinning

# one decode step's widest matmul (2 x rows x in x out FLOPs) below this runs on one thread: the default's widest,
# gate and up at 128 rows, is 33.5 MFLOP (one thread pays); hidden 256's is 134 MFLOP (even, so the torch setting)
ONE_THREAD_FLOPS = 64e6


SPINNING = spinning(os.environ)  # rlnb.core.waits: as GNU OpenMP reads it


def widest_matmul_flops(config, rows: int) -> float:
    """FLOPs of a decode step's widest matmul over ``rows`` rows: the q/k/v projection, the MLP's gate and up, or the
    LM head, whichever is widest (2 x rows x hidden x width)."""
    hidden = config.hidden_size
    heads = getattr(config, "num_attention_heads", 1)
    head_dim = getattr(config, "head_dim", None) or hidden // heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    widths = ((heads + 2 * kv_heads) * head_dim, 2 * getattr(config, "intermediate_size", hidden),
              getattr(config, "vocab_size", hidden))
    return 2.0 * rows * hidden * max(widths)


def decode_threads(model, rows: int, device: torch.device) -> int:
    """Threads a decode of ``rows`` rows on ``device`` uses: 1 on a CPU where the widest matmul is below
    ``ONE_THREAD_FLOPS`` and the waits are passive, else torch's current setting (``torch.get_num_threads()``)."""
    n = torch.get_num_threads()
    config = getattr(model, "config", None)
    if SPINNING or device.type != "cpu" or n == 1 or config is None or not hasattr(config, "hidden_size"):
        return n
    return 1 if widest_matmul_flops(config, rows) < ONE_THREAD_FLOPS else n


@contextlib.contextmanager
def threads(n: int):
    """Within the block torch runs on ``n`` threads when that is fewer than its setting; the setting comes back
    after it, whatever happens (a user's ``torch.set_num_threads`` is never changed for longer than a decode)."""
    before = torch.get_num_threads()
    if n >= before:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
