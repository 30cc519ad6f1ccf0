"""The lean decode's rows as parts (``rlnb.models.lean_decode``): each part runs its rows' step and samples its rows'
tokens, on parallel threads where there are two parts, one intra-op thread each.

A decode step of the embedded default is about a hundred small operators over 128 rows; on two threads that
wait passively each operator first wakes the other thread, which costs more than the second thread computes
(``rlnb.models.threads``), so the decode ran on one thread. Cut into parts of consecutive rows instead, each part
runs the whole step (every layer, its own rows' cache) and then samples its own rows on its own thread, with no
wake-up in between: the threads meet once per token.

Why the tokens are the one-call tokens: ``torch.multinomial`` draws one sample per row as argmax(p / q) with q
exponential noise drawn for the whole (rows, V) batch from the generator, so the noise is drawn here once for all
running rows, on the calling thread, in row order, and each part divides its own rows' probabilities by its own
rows of it (``draw``; tests check it against ``torch.multinomial``). Finished rows leave each part on the
reference's schedule, so each part always holds a run of consecutive running rows and the noise's rows line up.
Each row's arithmetic is its own in either layout (the matmuls are row by row), so the tokens are the one-call
tokens where the matrix library gives a row the same sums at another row count (tests compare them with
``rows="whole"``, one part on the calling thread).

What limits it: every operator call takes Python's lock, and two threads issuing calls of tens of microseconds hand
the lock over at nearly every call. Measured on the benchmark's 2-core machine (AMD EPYC, passive waits, the
embedded default, 32 new tokens): a 64-row decode alone takes 0.09-0.10 s; two at once take 0.13-0.17 s each as two
threads of one process, 0.10-0.11 s each as two processes (also in lockstep, meeting once per token). So the
fewer calls a part makes per step the better (``decode_step.FusedStep``, and the sampling in the parts), and
where the matmuls are small the second part runs in a worker process instead of on a thread
(``rlnb.models.decode_worker``: the same ``Part`` code there, so the same tokens). ``python -m rlnb.bench rows``
times whole steps both ways (``docs/bench_rows.txt``).
"""

from __future__ import annotations

import torch

from rlnb.models import row_split
from rlnb.models.generate import top_p_filter

MIN_ROWS = 8  # not measured: below this a part's step is nearly all fixed cost, and one call is the safe choice


def parts(rows: int, device: torch.device, mode: str) -> int:
    """How many parts a decode of ``rows`` rows runs as: ``row_split.PARTS`` on a CPU with two or more torch
    threads and ``mode`` "split" (``ForwardOptions.rows``) when every part gets ``MIN_ROWS``, else 1."""
    n = row_split.PARTS
    if mode != "split" or device.type != "cpu" or torch.get_num_threads() < 2 or rows < n * MIN_ROWS:
        return 1
    return n


def draw(logits: torch.Tensor, noise: torch.Tensor | None, *, temperature: float, top_p: float,
         greedy: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens (b,), their log-probs (b,)) for ``logits`` (b, V): argmax if greedy, else ``generate.next_token``'s
    temperature/top-p sample with ``noise`` (b, V), the exponential noise ``torch.multinomial`` would draw for
    these rows. Log-probs before top-p, as the reference records them; NaN where the logits are not finite."""
    z = logits if logits.dtype == torch.float32 else logits.float()     # (b, V)
    z = z if temperature == 1.0 else z / temperature                     # x / 1.0 is x: one operator fewer
    if greedy:
        tok = logits.argmax(-1)
    else:
        tok = top_p_filter(z, top_p).softmax(-1).div_(noise).argmax(-1)  # multinomial's own draw: argmax(p / q)
    return tok, z.log_softmax(-1).gather(-1, tok[:, None]).view(-1)


class Out:
    """What the parts write at their batch rows: tokens (B, T), pad after EOS, and their log-probs (B, T), 0 there
    (NaN where a running row's logits were not finite)."""

    def __init__(self, B: int, T: int, eos: int, pad: int, device):
        self.eos, self.pad = eos, pad
        self.tokens = torch.full((B, T), pad, dtype=torch.long, device=device)
        self.logps = torch.zeros(B, T, dtype=torch.float32, device=device)

    @classmethod
    def over(cls, tokens: torch.Tensor, logps: torch.Tensor, eos: int, pad: int) -> Out:
        """An ``Out`` writing into given tensors (the decode worker's, in its shared file), already pad and 0."""
        out = cls.__new__(cls)
        out.eos, out.pad, out.tokens, out.logps = eos, pad, tokens, logps
        return out


class Part:
    """Consecutive running rows of the decode: their step (its state holds their cache), their next logits, which
    batch rows they are, and which of them are done (EOS sampled, not yet dropped)."""

    def __init__(self, step, rows: torch.Tensor, logits: torch.Tensor):
        self.step, self.rows, self.logits = step, rows, logits           # (b,), (b, V)
        self.done = torch.zeros(len(rows), dtype=torch.bool, device=rows.device)
        self.tok, self.n_done = None, 0

    def __len__(self) -> int:
        return len(self.rows)

    def clear(self) -> None:
        """All its rows have left."""
        self.rows, self.done, self.n_done = self.rows[:0], self.done[:0], 0

    def advance(self, t: int, noise, drop: bool, out, opts: dict) -> int:
        """Step t for these rows: drop the done ones if ``drop``, feed the token of step t - 1, sample step t's
        into ``out`` (tokens and log-probs at the batch rows); returns how many of the rows are now done."""
        if drop:
            keep = torch.nonzero(~self.done).flatten()
            self.rows, self.tok, self.done, self.n_done = self.rows[keep], self.tok[keep], self.done[keep], 0
            self.step.select(keep, self.step.s.Tp + t - 1)             # the columns written so far
        if t > 0:
            self.logits = self.step(self.tok, t - 1)
        tok, lp = draw(self.logits, noise, **opts)
        shown = tok
        if self.n_done:                                                  # rows done, not yet dropped: pad and 0
            shown, lp = tok.masked_fill(self.done, out.pad), lp.masked_fill(self.done, 0.0)
        out.tokens[self.rows, t] = shown
        out.logps[self.rows, t] = lp
        self.done |= tok == out.eos
        self.tok, self.n_done = tok, int(self.done.sum())
        return self.n_done


def edges(B: int, n: int) -> list[int]:
    """Where ``n`` parts of ``B`` consecutive rows start, and the end."""
    return [B * i // n for i in range(n + 1)]


def split(step, logits: torch.Tensor, n: int) -> list[Part]:
    """``n`` parts of consecutive rows of ``step``'s state; each part's step shares the fused weights."""
    B = logits.shape[0]
    if n == 1:
        return [Part(step, torch.arange(B, device=logits.device), logits)]
    cuts = edges(B, n)
    return [Part(step.part(step.s.rows(lo, hi)), torch.arange(lo, hi, device=logits.device), logits[lo:hi])
            for lo, hi in zip(cuts, cuts[1:])]


def advance(parts: list[Part], t: int, noise, drop: bool, out: Out, opts: dict, context) -> int:
    """Every part's step t with its own rows of ``noise`` (on parallel threads where there are several, each
    under ``context()``; a part played by the decode worker, ``rlnb.models.decode_worker``, runs in its process
    meanwhile); returns how many running rows are done."""
    work, lo = [], 0
    for part in parts:
        n = len(part) - (part.n_done if drop else 0)                    # its rows after the drop
        if n == 0:                                                       # all its rows left: it is done with
            part.clear()
            continue
        work.append((part, None if noise is None else noise[lo:lo + n]))
        lo += n

    remote = [(part, nz) for part, nz in work if getattr(part, "remote", False)]
    for part, nz in remote:
        part.send(t, nz, drop)
    work = [(part, nz) for part, nz in work if not getattr(part, "remote", False)]

    def run(item):
        part, nz = item
        with context():
            return part.advance(t, nz, drop, out, opts)

    n_done = sum(row_split.run(run, work) if len(work) > 1 else [run(w) for w in work])
    return n_done + sum(part.receive() for part, _ in remote)
