"""Stage 2, the Rewarder: score each completion with one or more reward functions, keep every part."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import torch

from rlnb.algos import kl_penalized_rewards, overlong_penalty
from rlnb.batch import Batch

RewardFn = Callable[..., list[float]]  # TRL style: fn(completions, answer, **kw) -> list[float]


class RewardFunctionError(ValueError):
    """A reward function raised or returned something that is not a finite number."""


class Rewarder:
    """Total reward = sum_k weight_k * fn_k(completions, answers), each part kept in ``reward_parts``.

    Reads: ``completions``, ``answers``, ``prompts``; ``mask`` for overlong shaping; ``old_logp`` and
    ``ref_logp`` for a KL penalty in the reward.
    Writes: ``rewards`` (B,), ``reward_parts`` (name -> (B,)), ``correct`` (B,) (the part named
    ``correct`` > 0, when there is one).

    Two shaping terms join the sum with weight 1 when switched on, each kept as its own part:
    ``overlong`` (DAPO's soft overlong punishment, ``overlong_buffer`` > 0) and ``kl_penalty``
    (-kl_coef * sum_t k1, classic PPO/RLOO's KL in the reward, ``kl_coef`` > 0).

    ``on_error="raise"`` (default) stops with an error naming the function and the completion index
    when a function raises or returns None/NaN/a non-number; ``on_error="zero"`` scores such entries 0
    and counts them in ``self.errors``.
    """

    def __init__(self, funcs: dict[str, RewardFn], weights: dict[str, float] | None = None, *,
                 on_error: str = "raise", overlong_buffer: int = 0, max_new_tokens: int | None = None,
                 kl_coef: float = 0.0):
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
        if overlong_buffer and max_new_tokens is None:
            raise ValueError("max_new_tokens: expected L_max (an int) when overlong_buffer > 0")
        self.overlong_buffer, self.max_new_tokens, self.kl_coef = overlong_buffer, max_new_tokens, kl_coef

    @classmethod
    def for_task(cls, task, *, format_weight: float = 0.0, **kw) -> Rewarder:
        """The task's verifier parts: ``correct`` (weight 1) and ``format`` (``format_weight``)."""
        return cls(task.reward_funcs(), {"correct": 1.0, "format": format_weight}, **kw)

    def step(self, batch: Batch) -> Batch:
        parts = {name: self._score(name, fn, batch) for name, fn in self.funcs.items()}
        total = sum(self.weights[name] * parts[name] for name in parts)
        for name, term in self._shaping(batch).items():
            parts[name] = term
            total = total + term
        correct = parts["correct"] > 0 if "correct" in parts else None
        return batch.replace(rewards=total.float(), reward_parts=parts, correct=correct)

    def _shaping(self, batch: Batch) -> dict[str, torch.Tensor]:
        terms = {}
        if self.overlong_buffer:
            terms["overlong"] = overlong_penalty(batch.lengths, max_new_tokens=self.max_new_tokens,
                                                 overlong_buffer=self.overlong_buffer)
        if self.kl_coef:
            if batch.ref_logp is None:
                raise ValueError("batch.ref_logp: expected reference log-probs for a KL penalty in the reward")
            zero = torch.zeros(batch.B)
            terms["kl_penalty"] = kl_penalized_rewards(zero, batch.old_logp, batch.ref_logp, batch.mask,
                                                       kl_coef=self.kl_coef)
        return terms

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
