"""Stage 2, the Rewarder: score each completion with one or more reward functions, keep every part."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import torch

from rlnb.algos import kl_penalized_rewards, overlong_penalty
from rlnb.batch import Batch, require
from rlnb.recipe import check_fields
from rlnb.stages.verify import RewardFunctionError, RewardTimeout, call_limited, check_time_limit

__all__ = ["Rewarder", "RewardFunctionError", "RewardTimeout", "check_time_limit"]

RewardFn = Callable[..., list[float]]  # TRL style: fn(completions, answer, **kw) -> list[float]


class Rewarder:
    """Total reward = sum_k weight_k * fn_k(completions, answers), each part kept in ``reward_parts``.

    Reads: ``completions``, ``answers``, ``prompts``; ``mask`` for overlong shaping; ``old_logp`` and
    ``ref_logp`` for a KL penalty in the reward.
    Writes: ``rewards`` (B,), ``reward_parts`` (name -> (B,)), ``correct`` (B,) (the part named
    ``correct`` > 0, when there is one); ``extras["reward_weights"]`` (B, K): each part's weight in the
    total, in ``reward_parts``' order, so rewards = sum_k weights[:, k] * parts[k] (GDPO reads both); ``extras["greedy_rewards"]`` (B,) when the Sampler wrote
    ``extras["greedy_completions"]``: the weighted sum of the functions on each prompt's greedy completion
    (ReMax's baseline; the shaping terms below are not added to it).

    Two shaping terms join the sum with weight 1 when switched on, each kept as its own part:
    ``overlong`` (DAPO's soft overlong punishment, ``overlong_buffer`` > 0) and ``kl_penalty``
    (-kl_coef * sum_t k1, classic PPO/RLOO's KL in the reward, ``kl_coef`` > 0).

    ``on_error="raise"`` (default) stops with an error naming the function and the completion index
    when a function raises or returns None/NaN/a non-number (a function that raises on the batch is
    re-run one completion at a time to find the culprit); ``on_error="zero"`` scores such entries 0,
    counts them in ``self.errors`` and marks them in ``extras["reward_errors"]`` (B,) (failed functions
    per row).
    """

    def __init__(self, funcs: dict[str, RewardFn], weights: dict[str, float] | None = None, *,
                 on_error: str = "raise", overlong_buffer: int = 0, max_new_tokens: int | None = None,
                 kl_coef: float = 0.0, time_limit: float | None = None):
        if not isinstance(funcs, dict) or not funcs:
            raise TypeError(f"funcs: expected a non-empty dict name -> reward function, got {funcs!r}")
        for name, fn in funcs.items():
            if not callable(fn):
                raise TypeError(f"funcs[{name!r}]: expected a callable fn(completions, answer, **kw) -> list[float], "
                                f"got {fn!r}")
        if on_error not in ("raise", "zero"):
            raise ValueError(f"on_error: expected 'raise' or 'zero', got {on_error!r}")
        weights = dict(weights or {})
        unknown = sorted(set(weights) - set(funcs))
        if unknown:
            raise ValueError(f"weights: names {unknown} are not reward functions; known: {sorted(funcs)}")
        for name, w in weights.items():
            if _number(w) is None:
                raise TypeError(f"weights[{name!r}]: expected a finite number, got {w!r}")
        self.funcs = dict(funcs)
        self.weights = {name: float(weights.get(name, 1.0)) for name in funcs}
        self.on_error, self.errors = on_error, 0
        self.time_limit = check_time_limit("time_limit", time_limit)
        check_fields({"kl_coef": "beta"}, overlong_buffer=overlong_buffer, kl_coef=kl_coef,
                     **({"max_new_tokens": max_new_tokens} if max_new_tokens is not None else {}))
        if overlong_buffer and max_new_tokens is None:
            raise ValueError("max_new_tokens: expected L_max (an int) when overlong_buffer > 0")
        self.overlong_buffer, self.max_new_tokens, self.kl_coef = overlong_buffer, max_new_tokens, kl_coef

    @classmethod
    def for_task(cls, task, *, format_weight: float = 0.0, **kw) -> Rewarder:
        """The task's verifier parts: ``correct`` (weight 1) and ``format`` (``format_weight``)."""
        return cls(task.reward_funcs(), {"correct": 1.0, "format": format_weight}, **kw)

    def step(self, batch: Batch) -> Batch:
        require(batch, ["completions"] + (["mask"] if self.overlong_buffer else []) + (["old_logp", "ref_logp", "mask"]
                if self.kl_coef else []), "Rewarder")
        scored = {name: self._score(name, fn, batch) for name, fn in self.funcs.items()}
        parts = {name: values for name, (values, _) in scored.items()}
        failed = sum(f.float() for _, f in scored.values())                  # (B,) failed functions per row
        total = sum(self.weights[name] * parts[name] for name in parts)
        for name, term in self._shaping(batch).items():
            parts[name] = term
            total = total + term
        correct = parts["correct"] > 0 if "correct" in parts else None
        extras = {**batch.extras, "reward_errors": failed} if self.on_error == "zero" else dict(batch.extras)
        if "greedy_completions" in batch.extras:
            extras["greedy_rewards"] = self._greedy_rewards(batch)
        weights = torch.tensor([self.weights.get(name, 1.0) for name in parts])     # (K,) shaping terms: 1
        extras["reward_weights"] = weights.expand(batch.B, -1).clone()              # (B, K), parts' order
        return batch.replace(rewards=total.float(), reward_parts=parts, correct=correct, extras=extras)

    def score(self, completions: list[str], answers: list, prompts: list[str] | None = None) -> dict[str, torch.Tensor]:
        """Score texts outside a training batch (held-out evaluation, VinePPO's continuations) on the same call
        path as ``step``: time limit and ``on_error`` alike. Returns ``total`` (n,) (weighted sum of the
        functions; no shaping terms), each function's part (n,) and ``failed`` (n,) (functions that failed)."""
        n = len(completions)
        prompts = list(prompts) if prompts is not None else [""] * n
        batch = Batch(prompts, list(answers), torch.arange(n), 1, completions=list(completions))
        scored = {name: self._score(name, fn, batch) for name, fn in self.funcs.items()}
        out = {name: values for name, (values, _) in scored.items()}
        out["total"] = sum(self.weights[name] * out[name] for name in self.funcs).float()
        out["failed"] = sum(f.float() for _, f in scored.values())
        return out

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

    def _greedy_rewards(self, batch: Batch) -> torch.Tensor:
        """(B,) the weighted total on each prompt's greedy completion, scored once per prompt."""
        G = batch.group_size
        greedy = Batch(batch.prompts[::G], batch.answers[::G], batch.prompt_index[::G], 1,
                       completions=list(batch.extras["greedy_completions"][::G]))        # one row per prompt
        total = sum(self.weights[name] * self._score(name, fn, greedy)[0] for name, fn in self.funcs.items())
        return total.float().repeat_interleave(G)

    def _score(self, name: str, fn: RewardFn, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """(B,) scores of one function and (B,) bool marks of the entries that failed (scored 0)."""
        try:
            values = self._call(name, fn, batch.completions, batch.answers, prompts=batch.prompts)
        except RewardTimeout:  # scoring row by row would take B times the limit: the whole call fails
            if self.on_error == "raise":
                raise
            self.errors += batch.B
            return torch.zeros(batch.B), torch.ones(batch.B, dtype=torch.bool)
        except Exception as e:  # find the completion that makes it fail: score the rows one by one
            return self._score_rows(name, fn, batch, e)
        if values is None or not hasattr(values, "__len__") or len(values) != batch.B:
            got = "None" if values is None else (len(values) if hasattr(values, "__len__") else type(values).__name__)
            err = RewardFunctionError(f"reward function {name!r}: expected a list of {batch.B} numbers "
                                      f"(one per completion), got {got}")
            if self.on_error == "raise":
                raise err
            return self._score_rows(name, fn, batch, err)
        out, failed = torch.zeros(batch.B), torch.zeros(batch.B, dtype=torch.bool)
        for i, v in enumerate(values):
            value = _number(v)
            if value is None:
                self._fail(name, i, batch, f"returned {v!r}", failed)
            else:
                out[i] = value
        return out, failed

    def _call(self, name: str, fn: RewardFn, *args, **kwargs):
        """``fn(*args, **kwargs)`` under ``time_limit`` (``rlnb.stages.verify.call_limited``: the one call path)."""
        return call_limited(fn, *args, time_limit=self.time_limit, name=name, **kwargs)

    def _score_rows(self, name, fn, batch: Batch, first: Exception):
        out, failed = torch.zeros(batch.B), torch.zeros(batch.B, dtype=torch.bool)
        for i in range(batch.B):
            try:
                values = self._call(name, fn, batch.completions[i : i + 1], batch.answers[i : i + 1],
                                    prompts=batch.prompts[i : i + 1])
                value = _number(values[0]) if values is not None and len(values) == 1 else None
                why = f"returned {values!r}"
            except Exception as e:
                value, why = None, f"raised {type(e).__name__}: {e}"
            if value is None:
                self._fail(name, i, batch, why, failed, cause=first)
            else:
                out[i] = value
        if not failed.any():  # fails on the whole batch only: no single completion to blame
            if self.on_error == "raise":
                raise RewardFunctionError(f"reward function {name!r} raised {type(first).__name__}: {first} "
                                          "on the batch, though not on any single completion") from first
            failed[:] = True
            out.zero_()
        return out, failed

    def _fail(self, name: str, i: int, batch: Batch, why: str, failed: torch.Tensor, cause=None) -> None:
        if self.on_error == "raise":
            raise RewardFunctionError(
                f"reward function {name!r} {why} for completion {i} ({batch.completions[i][:200]!r}); "
                f"expected a finite number within fp32's range (|r| <= {F32_MAX:g}) (set on_error='zero' / "
                "reward_on_error='zero' to score it 0)") from cause
        failed[i] = True
        self.errors += 1


F32_MAX = 3.4e38  # rewards are summed in fp32: a larger one would become inf there


def _number(v) -> float | None:
    """``v`` as a float if it is a finite real number that fp32 can hold (bools count as 0/1; 1-element
    tensors and NumPy scalars, ``numpy.bool_`` included, too).

    >>> import numpy as np
    >>> _number(np.bool_(True)), _number(np.float32(0.5)), _number(1e39), _number(float("nan"))
    (1.0, 0.5, None, None)
    """
    if isinstance(v, torch.Tensor) and v.numel() == 1 and not v.is_complex():
        v = v.item()
    elif type(v).__module__ == "numpy" and getattr(v, "shape", None) == () and hasattr(v, "item"):
        v = v.item()  # a NumPy scalar, e.g. what `np.mean(...) > 0.5` returns
    if isinstance(v, numbers.Real) and math.isfinite(v) and abs(v) <= F32_MAX:
        return float(v)
    return None
