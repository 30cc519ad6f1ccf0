"""One step of the loop, as the Trainer runs it: the stages in order, the forward a step can skip, the metrics it
writes, and what it leaves (``StepRecord``). The Trainer holds the run: it commits the record (``Trainer._commit``),
the one place a step changes the run's state."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from rlnb.algos import extra_inputs
from rlnb.batch import Batch
from rlnb.core.runtime import Timer, deferred_interrupt
from rlnb.stages.metrics import step_metrics
from rlnb.stages.runner import StageRunner
from rlnb.stages.update import UpdateStats


@dataclass(frozen=True)
class StepRecord:
    """What one step produced: the final batch, the update's stats, and the metrics written to history."""

    batch: Batch
    stats: UpdateStats
    metrics: dict


def run_stages(trainer, stage: StageRunner, commit) -> StepRecord:
    """sample -> reward (-> refill) (-> Monte-Carlo prefix values) -> advantage -> update, then
    ``commit(batch, stats, timer)`` inside the same uninterruptible block as the update."""
    batch = stage("sample", trainer.sampler.step, trainer.next_prompts())
    batch = stage("reward", trainer.rewarder.step, batch)
    batch = trainer.refill.step(batch, more=stage.next_round)    # DAPO: refill the groups the filters drop
    if trainer.valuer is not None:                                # VinePPO: Monte-Carlo prefix values
        with stage.timer("credit"):
            batch = trainer.valuer.step(batch)
    batch = stage("advantage", trainer.advantager.step, batch)
    with deferred_interrupt():  # Ctrl-C waits until the update is applied and recorded
        stats = stage("update", trainer.updater.step, batch)
        return commit(stage.updated(batch, stats), stats, stage.timer)


def old_logp_needed(recipe, updater, advantager) -> bool:
    """Whether anything reads the Sampler's ``old_logp`` before the update: not for an on-policy update (the
    ratio is exactly 1; in bypass mode pi_old is the sampler's mu, verl) unless the KL sits in the reward, a critic
    runs, top-k log-probs are kept, or the estimator reads it (the token baseline)."""
    r = recipe
    skip = (updater.on_policy or r.bypass_mode) and not (r.kl_in_reward and r.beta > 0) and not r.critic \
        and not r.topk_logprobs
    return not (skip and "old_logp" not in extra_inputs(advantager.estimator))


@contextlib.contextmanager
def old_logp_from_update(trainer):
    """Skip the Sampler's recomputing forward for this step when nothing reads ``old_logp`` before an on-policy
    update (see ``Sampler``): the ratio is still exactly 1, one forward cheaper."""
    trainer.sampler.recompute_old_logp = old_logp_needed(trainer.recipe, trainer.updater, trainer.advantager)
    try:
        yield
    finally:
        trainer.sampler.recompute_old_logp = True  # a stage run by hand shows old_logp as always


def record_metrics(trainer, batch: Batch, stats: UpdateStats, timer: Timer) -> dict:
    """The metrics step ``trainer.step_count + 1`` writes to history: the batch's and the update's, the timings,
    dynamic sampling's rounds, reward errors, the controllers' (which move their coefficients here) and the knobs
    the trainer logs."""
    metrics = {"step": trainer.step_count + 1, **step_metrics(batch, stats), **timer.metrics()}
    sampled = trainer.refill.zero_std_per_round
    if sampled:
        metrics["gen_rounds"] = len(sampled)
        metrics["frac_reward_zero_std_sampled"] = sum(sampled) / len(sampled)
    if "reward_errors" in batch.extras:  # reward_on_error="zero": entries scored 0 this step
        metrics["reward_errors"] = int(batch.extras["reward_errors"].sum())
    for ctl in trainer.controllers:
        metrics.update(ctl(batch, stats))
    metrics.update({f"hp/{name}": trainer.knob(name) for name in trainer.logged_knobs})
    return metrics
