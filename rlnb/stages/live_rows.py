"""Which rows of a mini-batch can move the weights, and the update's forward with a graph for those rows only.

A group whose G completions all got the same reward has advantage 0 on every token (GRPO, Dr. GRPO, RLOO: each
row minus its group's mean). Under a policy loss that multiplies every token's loss by its advantage
(``rlnb.algos.registry.vanishes_at_zero_adv``: the PPO and policy-gradient families) such a row adds exactly
nothing to the gradient: its backward multiplies zeros through every layer. Early in a run most groups are like
that (all wrong), late in a run many again (all right); TRL logs the share as ``frac_reward_zero_std``, about 0.5
on the benchmark's batch.

So the update runs those rows' forward without a graph, and its backward over the other rows only. Their log-probs,
entropies and ratios are computed as before: the loss's value, the metrics and the per-token tensors the widgets
show are the same. The gradient is the same to rounding: the skipped rows added exact zeros (the parts' sums now
run over fewer positions, so the last digits of a sum may differ). A row filtered out of the loss (``keep`` False,
its loss mask all zero) is skipped too.

It applies where nothing else in the loss reaches those rows: no KL term (``beta`` 0), no entropy bonus
(``entropy_coef`` 0), no critic, a loss that declares it, gradients enabled, and some rows live and some not (with
every row live, or none, the forward runs as before: a step whose every row is silent still steps the optimizer
with the zero gradient the full backward gives). ``ForwardOptions(backward="all")`` keeps a graph for every row, the
reference the tests compare with.

Where the update runs as row parts on parallel threads (``rlnb.models.row_split``), the live rows and the silent
rows are each cut into the parts, whole groups at a time, so every thread gets its share of both.
"""

from __future__ import annotations

import torch

from rlnb.algos.registry import vanishes_at_zero_adv
from rlnb.core import forward_options
from rlnb.models import row_split
from rlnb.models.forward import PolicyOut


def live(updater, mb, mask: torch.Tensor) -> torch.Tensor | None:
    """(b,) True where the row's loss gradient can be nonzero (some token in the loss ``mask`` (b, T) has a nonzero
    advantage); None where a graph is kept for every row (see the module doc: the loss's other terms reach every
    row, ``backward="all"``, or all rows are live, or none)."""
    if forward_options.current().backward == "all" or not torch.is_grad_enabled():
        return None
    if updater.beta or updater.entropy_coef or updater.value_head is not None \
            or not vanishes_at_zero_adv(updater.loss_fn):
        return None
    m = mask.bool()                                                      # (b, T)
    adv = mb.adv if mb.adv.dim() == 2 else mb.adv[:, None].expand_as(m)  # (b, T)
    rows = ((adv != 0) & m).any(-1)                                      # (b,) some token can move the weights
    return None if bool(rows.all()) or not bool(rows.any()) else rows


def run(forward, model, mb, alive: torch.Tensor | None, mode: str) -> tuple[PolicyOut, list | None]:
    """``forward(rows)`` over the mini-batch, with a graph only for the ``alive`` rows (None: every row), as row parts
    on parallel threads where ``row_split.parts`` splits (``mode``: ``ForwardOptions.rows``): (the outputs in batch
    order, each part's output that carries a graph, for ``row_split.backward``; None where it ran as one call)."""
    cut = row_split.parts(model, mb.B, mb.group_size, mb.prompt_ids.device, mode)
    if alive is None:
        if cut is None:
            return forward(slice(None)), None
        outs = row_split.run(forward, cut)                                # parts are consecutive rows, in order
        return _cat(outs), outs
    n = 1 if cut is None else len(cut)
    rows = torch.arange(mb.B, device=alive.device)
    pieces = list(zip(_groups_into(rows[alive], mb.group_size, n), _groups_into(rows[~alive], mb.group_size, n)))

    def both(piece):
        grad_rows, still_rows = piece
        with_graph = forward(grad_rows) if len(grad_rows) else None
        with torch.no_grad():
            without = forward(still_rows) if len(still_rows) else None
        return with_graph, without

    done = row_split.run(both, pieces) if n > 1 else [both(pieces[0])]
    graphs = [g for g, _ in done if g is not None]
    order = torch.cat([p[0] for p in pieces] + [p[1] for p in pieces])  # batch row of each output row
    full = _cat(graphs + [s for _, s in done if s is not None])
    back = torch.argsort(order)                                          # output row of each batch row
    return PolicyOut(*[None if f is None else f[back] for f in full]), (graphs if n > 1 else None)


def _cat(outs: list) -> PolicyOut:
    return PolicyOut(*[None if f[0] is None else torch.cat(f) for f in zip(*outs)])


def _groups_into(rows: torch.Tensor, group_size: int, n: int) -> list[torch.Tensor]:
    """``rows`` (sorted batch rows) cut into ``n`` runs of whole groups, as even in groups as they go."""
    if len(rows) == 0:
        return [rows] * n
    groups = torch.unique_consecutive(rows // max(group_size, 1), return_counts=True)[1].tolist()
    per = torch.split(rows, groups)                                       # the rows of each group
    edges = [len(per) * i // n for i in range(n + 1)]
    return [torch.cat(per[a:b]) if b > a else rows[:0] for a, b in zip(edges, edges[1:])]
