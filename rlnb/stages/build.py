"""The stages of a step, built from a ``Recipe``: registry names are resolved here, once, so no stage ever
needs to know which algorithm it runs. Also what a Trainer builds beside them: the optimizer with the critic's
value head, and the pass-rate history. Rebuilt between steps by ``rlnb.stages.reconfigure``."""

from __future__ import annotations

from dataclasses import dataclass

from rlnb.algos import (
    ADVANTAGES,
    AGGREGATIONS,
    ENTROPY_BONUSES,
    FILTERS,
    KL_ESTIMATORS,
    POLICY_LOSSES,
    ROLLOUT_CORRECTIONS,
    PassRateHistory,
    ValueHead,
    bind,
    extra_inputs,
    gae,
    top_entropy_mask,
    value_loss,
)
from rlnb.stages.advantage import Advantager
from rlnb.stages.credit import PrefixValuer
from rlnb.stages.optim import make_optimizer
from rlnb.stages.refill import DynamicSampling
from rlnb.stages.reward import Rewarder
from rlnb.stages.sample import Sampler
from rlnb.stages.update import Updater


@dataclass
class Stages:
    sampler: Sampler
    rewarder: Rewarder
    refill: DynamicSampling
    valuer: PrefixValuer | None  # VinePPO's Monte-Carlo prefix values, when the estimator reads them
    advantager: Advantager
    updater: Updater


def build_stages(r, *, model, tokenizer, task, ref_model, value_head, optimizer, scheduler, generators: dict,
                 reward_on_error: str, pass_rates, reward_time_limit: float | None = None) -> Stages:
    """Sampler, Rewarder, dynamic sampling, Advantager and Updater for recipe ``r`` (rebuilt by
    ``Trainer.reconfigure``: weights, optimizer and random streams are kept)."""
    estimator = bind(ADVANTAGES[r.advantage], r)
    greedy = not r.critic and "greedy_rewards" in extra_inputs(estimator)  # a greedy rollout as baseline
    pi2 = not r.critic and "sum_pi_squared" in extra_inputs(estimator)     # the token baseline's path weights
    filters = [bind(FILTERS[f], r) for f in r.filters]
    sampler = Sampler(model, tokenizer, temperature=r.temperature, top_p=r.top_p, max_new_tokens=r.max_new_tokens,
                      ref_model=ref_model, fp32_lm_head=r.fp32_lm_head, value_head=value_head, topk=r.topk_logprobs,
                      greedy=greedy, generator=generators["sample"], record_sum_pi_squared=pi2,
                      rollout_temperature=r.rollout_temperature, rollout_bf16=r.rollout_bf16)
    rewarder = Rewarder.for_task(task, format_weight=r.format_weight, overlong_buffer=r.overlong_buffer,
                                 max_new_tokens=r.max_new_tokens, kl_coef=r.beta if r.kl_in_reward else 0.0,
                                 on_error=reward_on_error, time_limit=reward_time_limit)
    refill = DynamicSampling(filters, max_gen_rounds=r.max_gen_rounds, pass_rates=pass_rates)
    valuer = (PrefixValuer(model, tokenizer, task, K=r.mc_rollouts, temperature=r.temperature, top_p=r.top_p,
                           max_new_tokens=r.max_new_tokens, generator=generators["credit"],
                           on_error=reward_on_error, time_limit=reward_time_limit)
              if not r.critic and "prefix_values" in extra_inputs(estimator) else None)
    corrections = tuple(bind(ROLLOUT_CORRECTIONS[n], r) for n in r.rollout_correction)
    advantager = Advantager(estimator, filters=filters, gae=bind(gae, r) if r.critic else None, corrections=corrections)
    updater = Updater(
        model, optimizer, scheduler, loss_fn=bind(POLICY_LOSSES[r.loss], r),
        agg_fn=bind(AGGREGATIONS[r.aggregation], r), kl_fn=bind(KL_ESTIMATORS[r.kl_estimator], r),
        beta=0.0 if r.kl_in_reward else r.beta, entropy_coef=r.entropy_coef, temperature=r.temperature,
        num_iterations=r.num_iterations, num_mini_batches=r.num_mini_batches, max_grad_norm=r.max_grad_norm,
        fp32_lm_head=r.fp32_lm_head, value_head=value_head, value_loss_fn=bind(value_loss, r),
        vf_coef=r.vf_coef, token_mask=bind(top_entropy_mask, r), entropy_rule=ENTROPY_BONUSES[r.entropy_aggregation],
        corrections=corrections, bypass_mode=r.bypass_mode,
        use_bias_correction_kl=r.use_bias_correction_kl, generator=generators["update"],
    )
    return Stages(sampler, rewarder, refill, valuer, advantager, updater)


def build_optimizer(r, model):
    """``(value_head, optimizer, scheduler)`` for recipe ``r``: a value head on the model's device when ``r.critic``
    (trained by the same optimizer), AdamW with ``r``'s learning rate, weight decay and warm-up."""
    hidden = model.get_output_embeddings().weight.shape[1]
    value_head = ValueHead(hidden).to(next(model.parameters()).device) if r.critic else None
    optimizer, scheduler = make_optimizer(model, lr=r.lr, weight_decay=r.weight_decay, warmup_steps=r.warmup_steps,
                                          extra_modules=[value_head] if value_head is not None else [])
    return value_head, optimizer, scheduler


def pass_rates_for(r, current: PassRateHistory | None) -> PassRateHistory | None:
    """The pass-rate history recipe ``r`` needs: None without ``pass_rate_threshold``, else ``current`` under the new
    threshold (the prompts seen so far keep their counts) or a fresh one."""
    if r.pass_rate_threshold is None:
        return None
    if current is None:
        return PassRateHistory(pass_rate_threshold=r.pass_rate_threshold)
    current.threshold = r.pass_rate_threshold
    return current

