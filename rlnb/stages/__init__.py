"""The four stages of the loop. Each has ``.step(batch) -> batch`` (the Updater returns stats)."""

from rlnb.stages.advantage import Advantager
from rlnb.stages.reward import Rewarder, RewardFunctionError
from rlnb.stages.rollout import Rollout
from rlnb.stages.sample import Sampler
from rlnb.stages.update import Updater, UpdateStats, make_optimizer, set_schedule

__all__ = ["Advantager", "RewardFunctionError", "Rewarder", "Rollout", "Sampler", "UpdateStats", "Updater",
           "make_optimizer", "set_schedule"]
