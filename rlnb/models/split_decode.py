"""The lean decode's step (``rlnb.models.lean_decode``) as row parts on parallel threads, one intra-op thread each.

A decode step of the embedded default is about a hundred small operators over 128 rows; on two threads that
wait passively each operator first wakes the other thread, which costs more than the second thread computes
(``rlnb.models.threads``), so the decode ran on one thread. Cut into parts of consecutive rows instead, each part
runs the whole step (every layer, its own rows' cache) on its own thread with no wake-up in between: the
threads meet once per token, where the sampler draws.

What stays the same: the sampler still draws once for all running rows on the calling thread, from the
parts' logits concatenated in row order, so the generator draws what it draws in one call; finished rows leave
each part on the same schedule, so each part always holds a run of consecutive running rows. Each row's
arithmetic is its own in either layout (the matmuls are row by row), so the tokens are the one-call tokens where
the matrix library gives a row the same sums at another row count (tests compare them with ``rows="whole"``).

Measured on the benchmark's 2-core machine (AMD EPYC, passive waits, the embedded default, 128 rows, 32 new
tokens, median of 8): 0.18 s on one thread, 0.145 s as two parts. One half alone takes 0.113 s: much of an
operator's cost does not shrink with its rows (small-row matmuls, the one-query attention's batched matmuls, cache
copies), so a part pays it in full. ``python -m rlnb.bench rows`` times whole steps both ways.
"""

from __future__ import annotations

import copy

import torch

from rlnb.models import row_split

MIN_ROWS = 8  # not measured: below this a part's step is nearly all fixed cost, and one call is the safe choice


def parts(rows: int, device: torch.device, mode: str) -> int:
    """How many parts a decode of ``rows`` rows runs as: ``row_split.PARTS`` on a CPU with two or more torch
    threads and ``mode`` "split" (``ForwardOptions.rows``) when every part gets ``MIN_ROWS``, else 1."""
    n = row_split.PARTS
    if mode != "split" or device.type != "cpu" or torch.get_num_threads() < 2 or rows < n * MIN_ROWS:
        return 1
    return n


class SplitStep:
    """``step`` (a ``decode_step.Step``) over consecutive row parts of its state, each on its own thread;
    ``context()`` gives each part's thread what the calling thread runs under (no grad, the model's autocast)."""

    def __init__(self, step, n: int, context):
        B = step.s.kv[0][0].shape[0]
        edges = [B * i // n for i in range(n + 1)]
        self.steps = []
        for lo, hi in zip(edges, edges[1:]):
            part = copy.copy(step)                                       # shares the fused weights
            part.s = step.s.rows(lo, hi)
            self.steps.append(part)
        self.sizes = [hi - lo for lo, hi in zip(edges, edges[1:])]
        self.context = context

    def select(self, keep: torch.Tensor, cols: int) -> None:
        """Keep the running rows ``keep`` (sorted indices into the concatenated rows) in each part; the parts copy
        their caches at once, each on its thread."""
        lo, work = 0, []
        for i, (part, n) in enumerate(zip(self.steps, self.sizes)):
            mine = keep[(keep >= lo) & (keep < lo + n)] - lo
            if n:
                work.append((part.s, mine))
            lo, self.sizes[i] = lo + n, len(mine)
        if len(work) > 1:
            row_split.run(lambda item: item[0].select(item[1], cols), work)
        else:
            for state, mine in work:
                state.select(mine, cols)

    def __call__(self, tok: torch.Tensor, t: int) -> torch.Tensor:
        edges = [0]
        for n in self.sizes:
            edges.append(edges[-1] + n)
        work = [(part, tok[lo:hi]) for part, lo, hi in zip(self.steps, edges, edges[1:]) if hi > lo]

        def run(item):
            part, rows = item
            with self.context():
                return part(rows, t)

        outs = row_split.run(run, work) if len(work) > 1 else [run(work[0])]
        return torch.cat(outs)                                           # (b, V) in row order
