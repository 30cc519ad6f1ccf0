"""What a verifiable task is: prompts with answers, a verifier, and an answer extractor.

A ``Task`` gives a deterministic ``datasets.Dataset`` of ``prompt``/``answer`` rows from a seed, and
scores a completion with ``reward(completion, answer) -> Reward`` whose ``parts`` keep each component
(``correct``, ``format``). Verifiers parse model output; they never ``eval`` it, and they bound the
size of what they parse, so hostile or huge completions cost microseconds and never raise.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field

import datasets

MAX_COMPLETION_CHARS = 4096  # verifiers look at no more than this many characters


@dataclass(frozen=True)
class Reward:
    """A scalar reward and the parts it was built from (each part is kept for the learner to see)."""

    reward: float
    parts: dict[str, float] = field(default_factory=dict)


class Task:
    """Base class. Subclasses set ``name`` and implement ``make_example``, ``extract`` and ``verify``.

    ``format_weight`` is how much a well-formed completion adds to the reward (0 by default: the
    reward is correctness alone; the format part is still reported).
    """

    name: str = "task"
    description: str = ""
    format_weight: float = 0.0

    # --- to implement -------------------------------------------------------------------------
    def make_example(self, rng) -> dict:
        """One ``{"prompt": str, "answer": str, "target": str}`` row from a ``random.Random``.
        ``target`` is a reference completion, used for the supervised warm start."""
        raise NotImplementedError

    def extract(self, completion: str) -> str | None:
        """The final answer in ``completion`` as a string, or None if there is none."""
        raise NotImplementedError

    def is_well_formed(self, completion: str) -> bool:
        """Whether ``completion`` follows the task's output format."""
        return self.extract(completion) is not None

    def verify(self, extracted: str, answer: str) -> bool:
        return extracted == answer

    # --- shared -------------------------------------------------------------------------------
    def dataset(self, n: int, seed: int = 0) -> datasets.Dataset:
        """``n`` rows generated from ``seed``: identical for the same seed, different for another."""
        import random

        if not isinstance(n, int) or n < 1:
            raise ValueError(f"n: expected a positive int, got {n!r}")
        rng = random.Random(f"{self.name}:{seed}")
        rows = [self.make_example(rng) for _ in range(n)]
        return datasets.Dataset.from_list(rows)

    def reward(self, completion: str, answer: str) -> Reward:
        """Score one completion. Never raises on model output; a non-string scores 0."""
        if not isinstance(completion, str):
            return Reward(0.0, {"correct": 0.0, "format": 0.0})
        text = completion[:MAX_COMPLETION_CHARS]
        got = self.extract(text)
        correct = float(got is not None and self.verify(got, str(answer)))
        fmt = float(self.is_well_formed(text))
        return Reward(correct + self.format_weight * fmt, {"correct": correct, "format": fmt})

    def reward_funcs(self) -> dict[str, Callable[..., list[float]]]:
        """The parts as TRL-style reward functions ``fn(completions, answer, **kw) -> list[float]``."""

        def part(name):
            def fn(completions, answer, **kw):
                return [self.reward(c, a).parts[name] for c, a in zip(completions, answer)]

            fn.__name__ = f"{self.name}_{name}"
            return fn

        return {"correct": part("correct"), "format": part("format")}

    def __repr__(self) -> str:
        return f"<Task {self.name!r}: {self.description}>"


_TASKS: dict[str, Callable[[], Task]] = {}


def register(name: str):
    """Class decorator: make a task constructible by ``rlnb.tasks.get(name)``."""

    def deco(cls):
        _TASKS[name] = cls
        cls.name = name
        return cls

    return deco


def names() -> list[str]:
    return sorted(_TASKS)


def get(name: str | Task, **kwargs) -> Task:
    """The task called ``name`` (a ``Task`` instance passes through)."""
    if isinstance(name, Task):
        return name
    if name not in _TASKS:
        close = difflib.get_close_matches(str(name), names(), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise KeyError(f"task: unknown task {name!r}; known: {names()}{hint}")
    return _TASKS[name](**kwargs)
