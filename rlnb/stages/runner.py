"""How the Trainer runs one stage of a step: timed, then the callbacks told."""

from __future__ import annotations

from rlnb.batch import Batch
from rlnb.core.runtime import Timer
from rlnb.stages.update import UpdateStats


class StageRunner:
    """Runs one stage of a step: timed (``timing/<stage>_s``), then the callbacks' ``on_stage``."""

    def __init__(self, trainer, hooks: list):
        self.trainer, self.hooks, self.timer = trainer, hooks, Timer()

    def __call__(self, name: str, fn, batch):
        with self.timer(name):
            out = fn(batch)
        if name != "update":  # the update's callbacks see the batch with the update's own pi_old (updated())
            self.emit(name, out)
        return out

    def emit(self, name: str, batch: Batch) -> None:
        for cb in self.hooks:
            cb.on_stage(self.trainer, name, batch)

    def next_round(self) -> Batch:
        """Sample and reward the next P prompts (dynamic sampling's refills, and ``Trainer.rollout``)."""
        t = self.trainer
        return self("reward", t.rewarder.step, self("sample", t.sampler.step, t.next_prompts()))

    def updated(self, batch: Batch, stats: UpdateStats) -> Batch:
        """The batch as the update saw it: an on-policy update's own pi_old recorded for views and history."""
        if batch.old_logp is None:
            batch = batch.replace(old_logp=stats.old_logp)
        self.emit("update", batch)
        return batch
