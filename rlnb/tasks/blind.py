"""A reward with no information, on purpose: the training reward is pure noise, whatever the completion says.

Chapter 03 uses it to refute "normalisation can create signal the reward lacks": GRPO gives such a reward
unit-size advantages, and the model learns nothing from them. The verifier's parts stay in the batch (so the
accuracy curves and ``evaluate`` are honest); a part ``unpaid`` = -correct cancels the ``correct`` part the
Rewarder pays with weight 1, so the total is the noise alone (plus ``format_weight`` x ``format`` when that
weight is not 0; it is 0 by default).
"""

from __future__ import annotations

from rlnb.tasks.base import WRAPPERS, Task
from rlnb.tasks.noise import NoisyTask


class BlindTask(NoisyTask):
    """``task`` whose training reward is ``sigma`` x one standard-normal draw per completion.

    >>> t = blind("add", sigma=1.0, seed=0)
    >>> funcs = t.reward_funcs()
    >>> c, a = ["1589", "1588"], ["1589", "1589"]
    >>> parts = {k: f(c, a, prompts=["750+839="] * 2) for k, f in funcs.items()}
    >>> [round(parts["correct"][i] + parts["unpaid"][i], 9) for i in range(2)], parts["correct"]
    ([0.0, 0.0], [1.0, 0.0])
    """

    def __init__(self, task: str | Task, *, sigma: float = 1.0, seed: int = 0):
        if isinstance(sigma, bool) or not isinstance(sigma, (int, float)) or not 0 < sigma < float("inf"):
            raise ValueError(f"sigma: expected a finite standard deviation > 0, got {sigma!r}")
        super().__init__(task, sigma_sample=sigma, seed=seed)
        self.name = f"{self.task.name}+blind"
        self.description = f"{self.task.description} (training reward: noise of std {sigma}, no information)"

    def spec(self) -> dict:
        return {"name": self.name, "wrap": "blind", "task": self.task.spec(),
                "params": {"sigma": self.sigma_sample, "seed": self.seed}}

    def unpaid(self, completions: list[str], answer: list[str], **kw) -> list[float]:
        """-correct: cancels the ``correct`` part in the total reward."""
        return [-self.task.reward(c, a).parts["correct"] for c, a in zip(completions, answer)]

    def reward_funcs(self) -> dict:
        return {**super().reward_funcs(), "unpaid": self.unpaid}


def blind(task: str | Task, *, sigma: float = 1.0, seed: int = 0) -> BlindTask:
    """``task`` with a training reward of pure noise (see ``BlindTask``)."""
    return BlindTask(task, sigma=sigma, seed=seed)


def _from_spec(inner: Task, tokenizer=None, **params) -> BlindTask:
    return BlindTask(inner, **params)


WRAPPERS["blind"] = _from_spec  # a checkpoint of a blind run rebuilds its task (rlnb.tasks.from_spec)
