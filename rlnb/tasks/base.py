"""What a verifiable task is: prompts with answers, a verifier, and an answer extractor.

A ``Task`` gives a deterministic ``datasets.Dataset`` of ``prompt``/``answer`` rows from a seed, and
scores a completion with ``reward(completion, answer) -> Reward`` whose ``parts`` keep each component
(``correct``, ``format``). Verifiers parse model output; they never ``eval`` it, and they bound the
size of what they parse, so hostile or huge completions cost microseconds and never raise.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import datasets

from rlnb.core.checks import MAX_POOL, check_int, closest, short

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

        check_int("n", n, low=1, high=MAX_POOL)
        check_seed(seed)
        rng = random.Random(f"{self.name}:{seed}")
        rows = [self.make_example(rng) for _ in range(n)]
        for row in rows[:1]:  # a custom task's rows: the loop needs string prompts and answers
            if not isinstance(row, dict) or not all(isinstance(row.get(k), str) for k in ("prompt", "answer")):
                raise ValueError(f"make_example: expected a dict with 'prompt' and 'answer' strings, got {short(row)}")
        return datasets.Dataset.from_list(rows)

    # --- what a checkpoint keeps -----------------------------------------------------------------
    def params(self) -> dict | None:
        """The constructor arguments that rebuild this task, read back from the attributes of the same
        names; None when some are not stored that way or are not plain JSON values (then a checkpoint
        cannot rebuild the task and ``Trainer.load(..., task=...)`` must be given it)."""
        out = {}
        if type(self).__init__ is object.__init__:  # a task without parameters
            return out
        for p in list(inspect.signature(type(self).__init__).parameters.values())[1:]:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or not hasattr(self, p.name):
                return None
            value = getattr(self, p.name)
            value = str(value) if isinstance(value, Path) else value
            try:
                json.dumps(value, allow_nan=False)
            except (TypeError, ValueError):
                return None
            out[p.name] = value
        return out

    def spec(self) -> dict:
        """``{"name", "params"}``: what ``rlnb.tasks.from_spec`` rebuilds the task from."""
        return {"name": self.name, "params": self.params()}

    def state(self):
        """The task's own random state (None for a deterministic task); see ``NoisyTask``."""
        return None

    def set_state(self, state) -> None:
        if state is not None:
            raise ValueError(f"state: task {self.name!r} has no random state, got {short(state)}")

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


def check_seed(seed) -> None:
    """A dataset seed: an int or a string (the Trainer's pool seed is "train:<seed>")."""
    if isinstance(seed, bool) or not isinstance(seed, (int, str)):
        raise TypeError(f"seed: expected an int or a string, got {short(seed)}")


def get(name: str | Task, **kwargs) -> Task:
    """The task called ``name`` built with ``kwargs`` (its parameters); a ``Task`` instance passes through."""
    if isinstance(name, Task):
        if kwargs:
            raise TypeError(f"{sorted(kwargs)[0]}: parameters go to a task name, not to a built Task ({name!r})")
        return name
    if not isinstance(name, str):
        raise TypeError(f"task: expected a task name (one of {names()}) or a Task, got {short(name)}")
    if name not in _TASKS:
        raise KeyError(f"task: unknown task {name!r}; known: {names()}{closest(name, names())}")
    cls = _TASKS[name]
    known = [p for p in list(inspect.signature(cls.__init__).parameters)[1:] if p not in ("args", "kwargs")]
    for key in kwargs:
        if key not in known:
            raise TypeError(f"{key}: task {name!r} has no parameter {key!r}; known: {known}{closest(key, known)}")
    return cls(**kwargs)


def from_spec(spec, *, tokenizer=None) -> Task:
    """The task a checkpoint describes (``Task.spec()``), wrappers (``noisy``, chat templates) included."""
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise ValueError(f"task: expected a task spec {{'name': ..., 'params': ...}}, got {short(spec)}")
    wrap = spec.get("wrap")
    if wrap is not None:
        if wrap not in WRAPPERS:
            raise ValueError(f"task: unknown task wrapper {wrap!r}; known: {sorted(WRAPPERS)}")
        inner = from_spec(spec.get("task"), tokenizer=tokenizer)
        return WRAPPERS[wrap](inner, tokenizer=tokenizer, **(spec.get("params") or {}))
    if spec.get("params") is None:
        raise ValueError(f"task: the checkpoint cannot rebuild task {spec['name']!r} (its parameters are not "
                         "plain values); pass the task itself: Trainer.load(directory, task=...)")
    if not isinstance(spec["params"], dict):
        raise ValueError(f"task: expected a dict of parameters, got {short(spec['params'])}")
    return get(spec["name"], **spec["params"])


# Tasks that wrap another (spec["wrap"]): name -> builder(inner, *, tokenizer, **params). Each wrapper module
# registers its own (noise.py: "noisy", chat.py: "chat_template"); rlnb.tasks imports them all.
WRAPPERS: dict = {}
