"""Stage 2, the Rewarder: score each completion with one or more reward functions, keep every part."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import torch

from rlnb.batch import Batch

RewardFn = Callable[..., list[float]]  # TRL style: fn(completions, answer, **kw) -> list[float]


class RewardFunctionError(ValueError):
    """A reward function raised or returned something that is not a finite number."""


class Rewarder:
    """Total reward = sum_k weight_k * fn_k(completions, answers), each part kept in ``reward_parts``.

    Reads: ``completions``, ``answers``, ``prompts``.
    Writes: ``rewards`` (B,), ``reward_parts`` (name -> (B,)), ``correct`` (B,) (the part named
    ``correct`` > 0, when there is one).

    ``on_error="raise"`` (default) stops with an error naming the function and the completion index
    when a function raises or returns None/NaN/a non-number; ``on_error="zero"`` scores such entries 0
    and counts them in ``self.errors``.
    """

    def __init__(self, funcs: dict[str, RewardFn], weights: dict[str, float] | None = None, *,
                 on_error: str = "raise"):
        if not funcs:
            raise ValueError("funcs: expected at least one reward function")
        if on_error not in ("raise", "zero"):
            raise ValueError(f"on_error: expected 'raise' or 'zero', got {on_error!r}")
        weights = dict(weights or {})
        unknown = sorted(set(weights) - set(funcs))
        if unknown:
            raise ValueError(f"weights: names {unknown} are not reward functions; known: {sorted(funcs)}")
        self.funcs = dict(funcs)
        self.weights = {name: float(weights.get(name, 1.0)) for name in funcs}
        self.on_error, self.errors = on_error, 0

    @classmethod
    def for_task(cls, task, *, format_weight: float = 0.0, **kw) -> Rewarder:
        """The task's verifier parts: ``correct`` (weight 1) and ``format`` (``format_weight``)."""
        return cls(task.reward_funcs(), {"correct": 1.0, "format": format_weight}, **kw)

    def step(self, batch: Batch) -> Batch:
        parts = {name: self._score(name, fn, batch) for name, fn in self.funcs.items()}
        total = sum(self.weights[name] * parts[name] for name in parts)
        correct = parts["correct"] > 0 if "correct" in parts else None
        return batch.replace(rewards=total.float(), reward_parts=parts, correct=correct)

    def _score(self, name: str, fn: RewardFn, batch: Batch) -> torch.Tensor:
        try:
            values = fn(batch.completions, batch.answers, prompts=batch.prompts)
        except Exception as e:
            if self.on_error == "raise":
                raise RewardFunctionError(f"reward function {name!r} raised {type(e).__name__}: {e}") from e
            self.errors += batch.B
            return torch.zeros(batch.B)
        if values is None or len(values) != batch.B:
            got = None if values is None else len(values)
            raise RewardFunctionError(f"reward function {name!r}: expected {batch.B} values, got {got}")
        out = torch.zeros(batch.B)
        for i, v in enumerate(values):
            ok = isinstance(v, numbers.Real) and math.isfinite(v)  # bools count as 0/1
            if ok:
                out[i] = float(v)
            elif self.on_error == "raise":
                raise RewardFunctionError(
                    f"reward function {name!r} returned {v!r} for completion {i} "
                    f"({batch.completions[i]!r}); expected a finite number")
            else:
                self.errors += 1
        return out
