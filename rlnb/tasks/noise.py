"""Reward noise on purpose: a task whose reward gets a Gaussian part shared by a group and one per sample.

Group-normalised advantages (GRPO, RLOO, Dr. GRPO) subtract the group mean, so noise that every
completion of a prompt shares cancels exactly; each completion's own noise does not. ``noisy(task,
sigma_shared=..., sigma_sample=...)`` lets a run measure the difference.
"""

from __future__ import annotations

import random

from rlnb.core.checks import MAX_SEED, check_int, check_number, short
from rlnb.tasks.base import WRAPPERS, Reward, Task, get


class NoisyTask(Task):
    """``task`` with an extra reward part ``noise`` = sigma_shared * z_prompt + sigma_sample * z_i.

    z_prompt is one standard-normal draw per distinct prompt in a call of the reward function (a batch:
    the G completions of a prompt share it), z_i one draw per completion. The draws come from a
    ``random.Random(seed)`` that advances with every call, so each step gets fresh noise and a run is
    reproducible. The ``correct`` and ``format`` parts, ``reward()`` and therefore ``evaluate`` and the
    accuracy metrics stay clean: only the training reward is noisy. Prompts and answers are those of
    ``task``.
    """

    def __init__(self, task: str | Task, *, sigma_shared: float = 0.0, sigma_sample: float = 0.0, seed: int = 0):
        for name, s in (("sigma_shared", sigma_shared), ("sigma_sample", sigma_sample)):
            check_number(name, s, low=0.0)  # a standard deviation: finite and >= 0
        check_int("seed", seed, high=MAX_SEED)
        self.task = get(task)
        self.name = f"{self.task.name}+noise"
        self.description = f"{self.task.description} (reward noise: shared {sigma_shared}, per sample {sigma_sample})"
        self.sigma_shared, self.sigma_sample, self.seed = float(sigma_shared), float(sigma_sample), int(seed)
        self.rng = random.Random(seed)

    # --- what a checkpoint keeps: the inner task, the sigmas, and where the noise stream is ---------------
    def spec(self) -> dict:
        return {"name": self.name, "wrap": "noisy", "task": self.task.spec(),
                "params": {"sigma_shared": self.sigma_shared, "sigma_sample": self.sigma_sample, "seed": self.seed}}

    def state(self) -> dict:
        version, internal, gauss_next = self.rng.getstate()
        return {"rng": [version, list(internal), gauss_next], "task": self.task.state()}

    def set_state(self, state) -> None:
        try:
            version, internal, gauss_next = state["rng"]
            self.rng.setstate((version, tuple(internal), gauss_next))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"state: expected NoisyTask.state()'s dict, got {short(state)} ({e})") from None
        self.task.set_state(state.get("task"))

    # --- the task's own behaviour, unchanged ---------------------------------------------------------
    def dataset(self, n: int, seed: int = 0):
        return self.task.dataset(n, seed=seed)

    def make_example(self, rng) -> dict:
        return self.task.make_example(rng)

    def extract(self, completion: str) -> str | None:
        return self.task.extract(completion)

    def is_well_formed(self, completion: str) -> bool:
        return self.task.is_well_formed(completion)

    def verify(self, extracted: str, answer: str) -> bool:
        return self.task.verify(extracted, answer)

    def reward(self, completion: str, answer: str) -> Reward:
        return self.task.reward(completion, answer)

    # --- the noise -----------------------------------------------------------------------------------
    def noise(self, completions: list[str], answer: list[str], prompts: list[str] | None = None, **kw) -> list[float]:
        """One noise value per completion; completions with the same prompt share the shared draw."""
        keys = prompts if prompts is not None else answer
        shared: dict[str, float] = {}
        out = []
        for key in keys:
            if key not in shared:
                shared[key] = self.rng.gauss(0.0, 1.0)
            out.append(self.sigma_shared * shared[key] + self.sigma_sample * self.rng.gauss(0.0, 1.0))
        return out

    def reward_funcs(self) -> dict:
        """The task's parts plus ``noise`` (the Rewarder weighs a part it has no weight for by 1)."""
        return {**self.task.reward_funcs(), "noise": self.noise}


def noisy(task: str | Task, *, sigma_shared: float = 0.0, sigma_sample: float = 0.0, seed: int = 0) -> NoisyTask:
    """``task`` whose training reward gets Gaussian noise: ``sigma_shared`` per group, ``sigma_sample`` per
    completion (see ``NoisyTask``).

    >>> t = noisy("add", sigma_shared=1.0, seed=0)
    >>> v = t.noise(["1", "2", "3"], ["9", "9", "7"], prompts=["4+5=", "4+5=", "3+4="])
    >>> v[0] == v[1] != v[2], t.reward("9", "9").reward
    (True, 1.0)
    """
    return NoisyTask(task, sigma_shared=sigma_shared, sigma_sample=sigma_sample, seed=seed)


def _wrap(inner, *, tokenizer=None, **params) -> NoisyTask:
    return NoisyTask(inner, **params)


WRAPPERS["noisy"] = _wrap
