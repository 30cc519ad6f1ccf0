"""Verifiable reasoning tasks, found by name: ``rlnb.tasks.names()``, ``rlnb.tasks.get(name)``."""

from rlnb.tasks import arithmetic, chat, countdown, gsm8k, loophole  # noqa: F401  (registers tasks and wrappers)
from rlnb.tasks.base import Reward, Task, from_spec, get, names, register
from rlnb.tasks.blind import BlindTask, blind
from rlnb.tasks.noise import NoisyTask, noisy

__all__ = ["BlindTask", "NoisyTask", "Reward", "Task", "blind", "from_spec", "get", "names", "noisy", "register"]
