"""A forward that skips most padding: rows bucketed by length, each bucket cut to its own longest row.

A batch is padded to its longest prompt (on the left) and its longest completion (on the right); on the
default run only 52-59 % of the completion positions hold tokens, and the decoder pays for every position.
``completion_hidden`` (``rlnb.models.forward``) therefore sorts the rows by real length, cuts them into a few
buckets of neighbours and runs each bucket at its own width.

Why the numbers do not change: the columns cut away are, for every row of the bucket, either left padding
(masked out of attention; positions come from the mask's running count, so the kept tokens keep theirs) or
right padding after the last completion token (which no earlier position attends to under the causal mask).
Each kept position sees the same tokens at the same positions, so its hidden state equals the padded path's
to rounding. Positions cut away come back as zeros; every caller masks them.

Batches whose rows repeat prompts (G completions each) go one step further by default: each distinct prompt
is computed once (``rlnb.models.shared_prompt``), and only the completions are bucketed.
``padding("bucketed")`` keeps the prompts in every row; ``padding("padded")`` turns bucketing off (the
reference the tests compare with).
"""

from __future__ import annotations

import torch

from rlnb.core import forward_options
from rlnb.core.forward_options import PADDING_MODES, check_choice

# a bucket below this many rows costs more in per-forward overhead than its padding saves (tiny models, CPU)
MIN_ROWS = 8
MAX_BUCKETS = 4


def padding(mode: str):
    """Within the block (this thread only), forwards run ``"shared"`` (the default: prompts once, completions
    bucketed), ``"bucketed"`` (whole rows bucketed) or ``"padded"`` (the reference). A Trainer's steps run with
    its own ``forward_options`` whatever the block says (``Trainer.set_forward_options`` changes them)."""
    check_choice("mode", mode, PADDING_MODES)
    return forward_options.using(padding=mode)


def padding_mode() -> str:
    """The padding mode in force in this thread."""
    return forward_options.current().padding


def bucketing() -> bool:
    return padding_mode() != "padded"


def real_lengths(prompt_mask: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row: prompt columns from the first prompt token on, completion columns up to the last token. (B,)"""
    Tp, T = prompt_mask.shape[1], mask.shape[1]
    p = prompt_mask.bool()
    first = torch.where(p.any(-1), p.long().argmax(-1), torch.full_like(p[:, 0], Tp, dtype=torch.long))
    c = mask.bool()
    last = T - c.flip(-1).long().argmax(-1)                               # one past the last token
    return Tp - first, torch.where(c.any(-1), last, torch.zeros_like(last))


def buckets(prompt_mask: torch.Tensor, mask: torch.Tensor, *, min_rows: int | None = None,
            max_buckets: int | None = None) -> list[tuple[torch.Tensor, int, int]]:
    """Rows sorted by real length, cut into at most ``max_buckets`` buckets of at least ``min_rows`` rows
    where the padded positions are fewest: for each, (row indices, prompt width, completion width)."""
    lp, lc = real_lengths(prompt_mask, mask)                              # (B,), (B,)
    out = []
    for rows in length_buckets(lp + lc, min_rows=min_rows, max_buckets=max_buckets):
        # at least one prompt column: the position that predicts the first completion token
        out.append((rows, min(max(int(lp[rows].max()), 1), prompt_mask.shape[1]), max(int(lc[rows].max()), 1)))
    return out


def length_buckets(lengths: torch.Tensor, *, min_rows: int | None = None,
                   max_buckets: int | None = None) -> list[torch.Tensor]:
    """Row indices sorted by ``lengths`` (B,), cut where padding is least (at most ``max_buckets`` runs of at
    least ``min_rows``)."""
    min_rows, max_buckets = min_rows or MIN_ROWS, max_buckets or MAX_BUCKETS
    order = torch.argsort(lengths, stable=True)
    n = max(1, min(max_buckets, len(lengths) // min_rows))
    return list(torch.split(order, split_sizes(lengths[order].tolist(), n, min_rows)))


def split_sizes(lengths: list[int], n: int, min_rows: int) -> list[int]:
    """Cut sorted ``lengths`` into at most ``n`` runs of at least ``min_rows`` (the last may be shorter
    only when all are) minimising sum(run size x its longest); cuts fall between distinct lengths.

    Dynamic programming over the distinct lengths (a few dozen): microseconds, not a forward.

    >>> split_sizes([1, 1, 1, 1, 9, 9], 2, 2)
    [4, 2]
    >>> split_sizes([1, 1, 1, 1, 9, 9], 2, 3)   # a run of two 9s is too short: one bucket
    [6]
    """
    ends, values = [], []                                                 # run ends after each distinct value
    for i, x in enumerate(lengths):
        if i + 1 == len(lengths) or lengths[i + 1] != x:
            ends.append(i + 1)
            values.append(x)
    INF = float("inf")
    best = {0: (0.0, [])}                                                 # rows covered -> (cost, sizes)
    for _ in range(n):
        nxt = dict(best)
        for start, (cost, sizes) in best.items():
            for end, x in zip(ends, values):
                if end - start >= min_rows or (end == len(lengths) and not sizes):
                    c = cost + (end - start) * x
                    if c < nxt.get(end, (INF,))[0]:
                        nxt[end] = (c, sizes + [end - start])
        best = nxt
    full = best.get(len(lengths))
    return full[1] if full else [len(lengths)]


def padded_share(prompt_mask: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """Share of the positions a forward computes that hold real tokens: padded, and bucketed."""
    lp, lc = real_lengths(prompt_mask, mask)
    real = float((lp + lc).sum())
    padded = mask.shape[0] * (prompt_mask.shape[1] + mask.shape[1])
    cut = sum(len(rows) * (wp + wc) for rows, wp, wc in buckets(prompt_mask, mask))
    return {"padded": real / padded, "bucketed": real / cut}


def bucketed_hidden(decoder, prompt_ids, prompt_mask, completion_ids, mask, *, inputs) -> torch.Tensor:
    """(B, T, H) hidden states at the positions that predict each completion token, one decoder call per
    bucket; zeros where a bucket was cut. ``inputs(prompt_ids, prompt_mask, completion_ids, mask)`` gives
    the decoder's (ids, attention mask, positions)."""
    B, T = completion_ids.shape
    out = None
    for rows, wp, wc in buckets(prompt_mask, mask):
        Tp = prompt_ids.shape[1]
        ids, attn, pos = inputs(prompt_ids[rows, Tp - wp:], prompt_mask[rows, Tp - wp:],
                                completion_ids[rows, :wc], mask[rows, :wc])
        h = decoder(input_ids=ids, attention_mask=attn, position_ids=pos).last_hidden_state[:, -wc - 1:-1]
        if out is None:
            out = h.new_zeros(B, T, h.shape[-1])                          # (B, T, H)
        out[rows[:, None], torch.arange(wc, device=rows.device)] = h      # differentiable (CopySlices)
    return out
