"""The four stages of the loop, and DAPO's dynamic sampling between reward and advantage. Each has
``.step(batch) -> batch`` (the Updater returns stats)."""

from rlnb.stages.advantage import Advantager
from rlnb.stages.optim import make_optimizer, set_schedule
from rlnb.stages.refill import DynamicSampling
from rlnb.stages.reward import Rewarder, RewardFunctionError
from rlnb.stages.sample import Sampler
from rlnb.stages.update import MiniBatchLoss, Updater, UpdateStats

__all__ = ["Advantager", "DynamicSampling", "RewardFunctionError", "Rewarder", "MiniBatchLoss", "Sampler", "UpdateStats", "Updater",
           "make_optimizer", "set_schedule"]
