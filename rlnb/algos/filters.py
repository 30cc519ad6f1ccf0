"""Filters: which completions stay in the loss. Pure functions of tensors that return a keep mask.

Uniform signature for every ``FILTERS`` entry::

    fn(rewards, group_size, truncated=None, correct=None, *, <hyper>) -> keep

- ``rewards`` (B,) float with each prompt's G = ``group_size`` rows contiguous; ``truncated`` (B,) bool,
  True where the completion hit ``max_new_tokens`` without finishing; ``correct`` (B,) bool, the
  Rewarder's verdict. They are positional-or-keyword with default None, so ``bind`` never mistakes them
  for hyperparameters; an entry that needs one raises ValueError when it is missing.
- ``keep`` (B,) bool. Group-level filters give every row of a group the same value.
- Combine several filters with ``&``. The Updater multiplies the loss mask by ``keep``, so dropped rows
  become all-zero mask rows, which every aggregation leaves out of its denominators.
- These functions do not decide whether advantages are computed before or after filtering; with
  group-centred advantages a zero-variance group has A = 0 either way.

``PassRateHistory`` (no-positive-resampling) is stateful and acts on *prompts* before sampling, so it is
a helper class rather than a registry entry.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

import torch

from rlnb.algos.registry import Registry
from rlnb.core.checks import check_tensor

FILTERS = Registry("filter")


def _per_group(x: torch.Tensor, group_size: int, name: str) -> torch.Tensor:
    from rlnb.algos.inputs import check_group_size

    check_tensor(name, x, finite=True)
    check_group_size(group_size)
    if x.dim() != 1 or x.numel() % group_size:
        raise ValueError(f"{name}: expected a 1-D tensor whose length is a multiple of group_size="
                         f"{group_size}, got shape {tuple(x.shape)}")
    return x.view(-1, group_size)                                      # (P, G)


def _rows(group_keep: torch.Tensor, group_size: int) -> torch.Tensor:
    return group_keep.repeat_interleave(group_size)                   # (P,) -> (B,)


@FILTERS.register("zero_variance")
def zero_variance(rewards: torch.Tensor, group_size: int, truncated: torch.Tensor | None = None,
                  correct: torch.Tensor | None = None) -> torch.Tensor:
    """Zero-variance filtering (ScaleRL, arXiv 2510.13786): drop groups whose G rewards are identical.

    Such a group has A = 0 under any group-centred estimator, so it adds no gradient, only weight in
    the denominators. Exact equality (rewards are usually a few discrete values). TRL logs the
    share of such groups as ``frac_reward_zero_std``.

    >>> zero_variance(torch.tensor([1., 0., 1., 1., 0.5, 0.5]), 2)
    tensor([ True,  True, False, False, False, False])
    """
    r = _per_group(rewards, group_size, "rewards")                     # (P, G)
    return _rows(r.amax(1) > r.amin(1), group_size)


@FILTERS.register("dynamic_sampling")
def dynamic_sampling(rewards: torch.Tensor, group_size: int, truncated: torch.Tensor | None = None,
                     correct: torch.Tensor | None = None) -> torch.Tensor:
    """DAPO dynamic sampling predicate (arXiv 2503.14476): keep groups with 0 < #correct < G.

    DAPO then resamples until the batch is full of kept groups; that loop is ``rlnb.stages.DynamicSampling``
    (``max_gen_rounds`` > 1), this is only the predicate. Counts ``correct``, not rewards, so a format bonus does not rescue a group.

    >>> dynamic_sampling(torch.zeros(6), 3, correct=torch.tensor([1, 0, 0, 1, 1, 1]).bool())
    tensor([ True,  True,  True, False, False, False])
    """
    _per_group(rewards, group_size, "rewards")
    if correct is None:
        raise ValueError("correct: dynamic_sampling needs the (B,) bool tensor of correct completions")
    n = _per_group(correct, group_size, "correct").sum(1)              # (P,) #correct per group
    return _rows((n > 0) & (n < group_size), group_size)


@FILTERS.register("overlong")
def overlong(rewards: torch.Tensor, group_size: int, truncated: torch.Tensor | None = None,
             correct: torch.Tensor | None = None) -> torch.Tensor:
    """Overlong filtering (DAPO, arXiv 2503.14476): truncated completions are masked out of the loss.

    A cut-off answer is not necessarily wrong reasoning, so its (usually negative) reward is noise.
    Row-level: the rest of the group stays.

    >>> overlong(torch.zeros(4), 2, truncated=torch.tensor([False, True, False, False]))
    tensor([ True, False,  True,  True])
    """
    _per_group(rewards, group_size, "rewards")
    if truncated is None:
        raise ValueError("truncated: overlong needs the (B,) bool tensor of truncated completions")
    _per_group(truncated, group_size, "truncated")
    return ~truncated.bool()


class PassRateHistory:
    """No-positive-resampling (ScaleRL, arXiv 2510.13786): once a prompt's pass rate reaches
    ``pass_rate_threshold`` (0.9), it is never drawn again.

    ``update`` records, for each prompt of a step, the pass rate of its latest group; a prompt whose
    latest group reaches the threshold is retired for good. ``keep(ids)`` says which prompts may still
    be sampled. Cumulative counts are kept for display (``summary``).

    >>> h = PassRateHistory()
    >>> h.update(["a", "b"], torch.tensor([1, 1, 1, 1, 1, 0, 0, 0]).bool(), group_size=4)
    >>> h.keep(["a", "b", "c"]), h.pass_rate("b")
    ([False, True, True], 0.25)
    """

    def __init__(self, *, pass_rate_threshold: float = 0.9):
        if not 0 < pass_rate_threshold <= 1:
            raise ValueError(f"pass_rate_threshold: expected a float in (0, 1], got {pass_rate_threshold}")
        self.threshold = pass_rate_threshold
        self.latest: dict[Hashable, float] = {}
        self.counts: dict[Hashable, list[int]] = {}                   # id -> [n_correct, n_seen]
        self.retired: set[Hashable] = set()

    def update(self, prompt_ids: Iterable[Hashable], correct: torch.Tensor, group_size: int) -> None:
        ids = list(prompt_ids)
        c = _per_group(correct.bool(), group_size, "correct")          # (P, G)
        if len(ids) != c.shape[0]:
            raise ValueError(f"prompt_ids: expected one id per group ({c.shape[0]}), got {len(ids)}")
        for pid, n in zip(ids, c.sum(1).tolist(), strict=True):
            self.latest[pid] = n / group_size
            tot = self.counts.setdefault(pid, [0, 0])
            tot[0], tot[1] = tot[0] + n, tot[1] + group_size
            if n / group_size >= self.threshold:
                self.retired.add(pid)

    def pass_rate(self, prompt_id: Hashable) -> float | None:
        """The latest group's pass rate, or None if the prompt was never seen."""
        return self.latest.get(prompt_id)

    def keep(self, prompt_ids: Iterable[Hashable]) -> list[bool]:
        return [pid not in self.retired for pid in prompt_ids]

    def summary(self) -> dict:
        return {"seen": len(self.latest), "retired": len(self.retired)}

    def state_dict(self) -> dict:
        """JSON-friendly state (prompt ids kept as a list, since JSON keys must be strings)."""
        return {"latest": list(self.latest.items()), "counts": list(self.counts.items()), "retired": list(self.retired)}

    def load_state_dict(self, state: dict) -> None:
        self.latest = {k: v for k, v in state["latest"]}
        self.counts = {k: list(v) for k, v in state["counts"]}
        self.retired = set(state["retired"])
