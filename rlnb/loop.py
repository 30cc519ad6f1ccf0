"""``Trainer``: builds the four stages from a ``Recipe`` and runs sample -> reward -> advantage -> update."""

from __future__ import annotations

import contextlib
import copy
from collections import deque
from dataclasses import dataclass

import torch

from rlnb import recipes as recipes_mod
from rlnb import tasks as tasks_mod
from rlnb.algos import (
    ADVANTAGES,
    AGGREGATIONS,
    FILTERS,
    KL_ESTIMATORS,
    POLICY_LOSSES,
    PassRateHistory,
    ValueHead,
    bind,
    extra_inputs,
    gae,
    top_entropy_mask,
    value_loss,
)
from rlnb.batch import Batch
from rlnb.controllers import build_controllers
from rlnb.evaluate import evaluate
from rlnb.metrics import step_metrics
from rlnb.recipe import Recipe
from rlnb.stages import (
    Advantager,
    Rewarder,
    Rollout,
    Sampler,
    Updater,
    UpdateStats,
    make_optimizer,
    set_schedule,
)
from rlnb.stages.credit import PrefixValuer
from rlnb.trainer_state import Timer, TrainerStateMixin, check_hooks, deferred_interrupt, hash_seed
from rlnb.validate import check_model, check_trainer_args

EVAL_SEED = 10_000  # held-out prompts; training prompts come from a pool seeded "train:<seed>"
KEEP_START_PARAMS = 50_000_000  # keep a CPU copy of the starting weights (a reference for beta > 0 later) up to this


@dataclass(frozen=True)
class StepRecord:
    """What one step produced: the final batch, the update's stats, and the metrics written to history."""

    batch: Batch
    stats: UpdateStats
    metrics: dict


class Trainer(TrainerStateMixin):
    """Run a recipe on a model and a task, one inspectable step at a time.

    ``Trainer(model, tokenizer, task, recipe, seed=0, **recipe_overrides)``; ``Trainer.tiny(...)`` uses
    the embedded default model. ``step()`` runs the four stages once; ``run(n)`` runs n steps with a
    progress bar and callbacks; ``history`` holds the metrics of every step, ``records`` the last
    batches and stats.

    A step that raises or is interrupted changes nothing (see ``docs/reliability.md``). With
    ``safe_update=True`` (default) this includes the weights and optimizer, at the cost of one copy of
    each per step; pass ``safe_update=False`` for models too big to copy. ``reward_on_error``: "raise"
    (default) stops at a reward function that raises or returns None/NaN/a non-number, naming it and the
    completion; "zero" scores such entries 0 and counts them in the ``reward_errors`` metric.
    """

    def __init__(self, model, tokenizer, task="add", recipe: str | Recipe = "grpo", *, seed: int = 0,
                 ref_model=None, pool_size: int = 4096, keep_records: int = 64, safe_update: bool = True,
                 reward_on_error: str = "raise", **overrides):
        check_trainer_args(model, tokenizer, seed=seed, ref_model=ref_model, pool_size=pool_size,
                           keep_records=keep_records, safe_update=safe_update, reward_on_error=reward_on_error)
        self.reward_on_error, self.pool_size = reward_on_error, pool_size  # saved with checkpoints
        self.recipe = recipes_mod.get(recipe, **overrides)
        self.task = tasks_mod.get(task)
        self.model, self.tokenizer, self.seed, self.safe_update = model, tokenizer, int(seed), safe_update
        self.pool = self.task.dataset(pool_size, seed=f"train:{seed}")
        self.step_count, self.prompts_drawn, self.history = 0, 0, []
        self.records: deque[StepRecord] = deque(maxlen=keep_records)
        if self.recipe.beta > 0 and ref_model is None:
            ref_model = copy.deepcopy(model).eval().requires_grad_(False)
        self.ref_model = ref_model
        device = next(model.parameters()).device  # sampling draws on the model's device; shuffling on the CPU
        self.generators = {name: torch.Generator(device=device if name != "update" else "cpu").manual_seed(
            hash_seed(seed, name)) for name in ("sample", "update", "dropout", "credit")}  # dropout: see trainer_state
        small = sum(p.numel() for p in model.parameters()) <= KEEP_START_PARAMS
        self._start_weights = ({k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
                               if small and ref_model is None else None)  # for reconfigure(beta=...) mid-run
        self.logged_knobs: tuple[str, ...] = ()  # knobs written to every step's metrics as hp/<name>
        self._build_optimizer()
        self._build_stages()
        self._run_target = None

    @classmethod
    def tiny(cls, recipe: str | Recipe = "grpo", task="add", *, seed: int = 0, **overrides) -> Trainer:
        """A trainer on the embedded default model (about 1M parameters; runs on a laptop CPU)."""
        from rlnb.models import load_default

        model, tokenizer = load_default()
        return cls(model, tokenizer, task, recipe, seed=seed, **overrides)

    @classmethod
    def from_pretrained(cls, name_or_path, task="add", recipe: str | Recipe = "grpo", **kwargs) -> Trainer:
        """A trainer on any Hugging Face causal LM (a name, or a local folder offline): bf16 on CUDA,
        gradient checkpointing, LoRA, chat templates. Options: ``rlnb.pretrained.from_pretrained``."""
        from rlnb.pretrained import from_pretrained

        return from_pretrained(cls, name_or_path, task=task, recipe=recipe, **kwargs)

    # --- construction: registry names are resolved here, once ---------------------------------
    def _build_optimizer(self) -> None:
        r = self.recipe
        hidden = self.model.get_output_embeddings().weight.shape[1]
        self.value_head = ValueHead(hidden).to(self.device) if r.critic else None
        self.optimizer, self.scheduler = make_optimizer(
            self.model, lr=r.lr, weight_decay=r.weight_decay, warmup_steps=r.warmup_steps,
            extra_modules=[self.value_head] if self.value_head is not None else [])

    def _build_stages(self) -> None:
        """The four stages from ``self.recipe``; rebuilt by ``reconfigure`` (the optimizer, weights and
        random streams are kept)."""
        r = self.recipe
        estimator = bind(ADVANTAGES[r.advantage], r)
        greedy = not r.critic and "greedy_rewards" in extra_inputs(estimator)  # a greedy rollout as baseline
        self.sampler = Sampler(self.model, self.tokenizer, temperature=r.temperature, top_p=r.top_p,
                               max_new_tokens=r.max_new_tokens, ref_model=self.ref_model, fp32_lm_head=r.fp32_lm_head,
                               value_head=self.value_head, topk=r.topk_logprobs, greedy=greedy,
                               generator=self.generators["sample"])
        self.rewarder = Rewarder.for_task(self.task, format_weight=r.format_weight, overlong_buffer=r.overlong_buffer,
                                          max_new_tokens=r.max_new_tokens, kl_coef=r.beta if r.kl_in_reward else 0.0,
                                          on_error=self.reward_on_error)
        self.valuer = (PrefixValuer(self.model, self.tokenizer, self.task, K=r.mc_rollouts, temperature=r.temperature,
                                    top_p=r.top_p, max_new_tokens=r.max_new_tokens, generator=self.generators["credit"])
                       if not r.critic and "prefix_values" in extra_inputs(estimator) else None)  # VinePPO's values
        self.advantager = Advantager(estimator, filters=[bind(FILTERS[f], r) for f in r.filters],
                                     gae=bind(gae, r) if r.critic else None)
        self.updater = Updater(
            self.model, self.optimizer, self.scheduler, loss_fn=bind(POLICY_LOSSES[r.loss], r),
            agg_fn=bind(AGGREGATIONS[r.aggregation], r), kl_fn=bind(KL_ESTIMATORS[r.kl_estimator], r),
            beta=0.0 if r.kl_in_reward else r.beta, entropy_coef=r.entropy_coef, temperature=r.temperature,
            num_iterations=r.num_iterations, num_mini_batches=r.num_mini_batches, max_grad_norm=r.max_grad_norm,
            fp32_lm_head=r.fp32_lm_head, value_head=self.value_head, value_loss_fn=bind(value_loss, r),
            vf_coef=r.vf_coef, token_mask=bind(top_entropy_mask, r), generator=self.generators["update"],
        )
        if r.pass_rate_threshold is None:
            self.pass_rates = None
        elif getattr(self, "pass_rates", None) is None:
            self.pass_rates = PassRateHistory(pass_rate_threshold=r.pass_rate_threshold)
        else:  # reconfigured: the prompts seen so far keep their counts under the new threshold
            self.pass_rates.threshold = r.pass_rate_threshold
        self.rollout = Rollout(self.sampler, self.rewarder, self.next_prompts, keep_mask=self.advantager.keep_mask,
                               max_gen_rounds=r.max_gen_rounds, pass_rates=self.pass_rates)
        self.controllers = build_controllers(r, self)

    def hyperparameters(self) -> dict[str, dict]:
        """What actually runs, per stage (``"advantage"``, ``"loss"``, ``"aggregation"``, ``"kl"``,
        ``"filters"``, then the other groups): ``{knob: value}``, with each knob the recipe leaves unset
        resolved to the chosen entry's own default, and beta and the entropy coefficient as the
        controllers have set them now."""
        hp = self.recipe.hyperparameters()
        hp["kl"]["beta"] = self.rewarder.kl_coef if self.recipe.kl_in_reward else self.updater.beta
        hp["entropy"]["entropy_coef"] = self.updater.entropy_coef
        return hp

    def knob(self, name: str):
        """The value knob ``name`` runs with now (see ``hyperparameters``); a knob no chosen entry takes
        reports the recipe's own value (UNSET when left to an entry)."""
        for stage in self.hyperparameters().values():
            if name in stage:
                return stage[name]
        if name not in self.recipe.knobs():
            raise KeyError(f"name: {name!r} is not a Recipe knob; known: {sorted(self.recipe.knobs())}")
        return getattr(self.recipe, name)

    def reconfigure(self, **changes) -> Recipe:
        """Change knobs between steps, keeping the weights, optimizer state, random streams and history:
        the recipe is replaced (validated first: a bad value raises naming the knob and changes nothing),
        the stages are rebuilt, and the optimizer's learning rate, warm-up and weight decay follow.
        Turning beta on mid-run uses the model the run started from as the reference. Returns the new
        recipe. ``critic`` cannot change mid-run (it adds a value head to the optimizer)."""
        if getattr(self, "_in_step", False):
            raise RuntimeError("reconfigure: called during a step; knobs change between steps")
        new = self.recipe.replace(**changes)                              # raises before anything changes
        if new.critic != self.recipe.critic:
            raise ValueError(f"critic: cannot switch the value head {'on' if new.critic else 'off'} mid-run; "
                             "build a new Trainer")
        ref = self.ref_model if new.beta == 0 or self.ref_model is not None else self._start_reference()
        states = {type(c): c.state() for c in self.controllers}
        self.recipe, self.ref_model = new, ref
        self._build_stages()
        for c in self.controllers:  # a controller that survives keeps its coefficient
            if type(c) in states:
                c.set(states[type(c)])
        set_schedule(self.optimizer, self.scheduler, lr=new.lr, warmup_steps=new.warmup_steps,
                     weight_decay=new.weight_decay)
        return new

    def _start_reference(self):
        """The frozen starting policy, rebuilt from the weights kept at construction."""
        if self._start_weights is None:
            raise ValueError("beta: turning the KL on mid-run needs the starting weights, which are kept only for "
                             f"models up to {KEEP_START_PARAMS:,} parameters; build the Trainer with beta > 0 "
                             "or pass ref_model=")
        ref = copy.deepcopy(self.model).eval().requires_grad_(False)
        ref.load_state_dict(self._start_weights)
        return ref

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    # --- prompts ------------------------------------------------------------------------------
    def next_prompts(self) -> Batch:
        """The next P prompts of the training pool (a fresh permutation each pass), G times each.
        Prompts retired by no-positive-resampling are skipped."""
        P, n = self.recipe.prompts_per_step, len(self.pool)
        picked = []
        for _ in range(n * 2 + P):  # two passes are enough to find P live prompts, or there are none
            epoch, pos = divmod(self.prompts_drawn, n)
            idx = int(self._perm(epoch)[pos])
            self.prompts_drawn += 1
            if self.pass_rates is None or self.pass_rates.keep([idx])[0]:
                picked.append(idx)
            if len(picked) == P:
                return Batch.from_rows(self.pool[picked], self.recipe.num_generations, prompt_index=picked)
        raise RuntimeError(f"pass_rate_threshold: every prompt of the pool is retired ({self.pass_rates.summary()})")

    def _perm(self, epoch: int) -> torch.Tensor:
        if getattr(self, "_perm_cache", (None,))[0] != epoch:
            g = torch.Generator().manual_seed(hash_seed(self.seed, f"epoch{epoch}"))
            self._perm_cache = (epoch, torch.randperm(len(self.pool), generator=g))
        return self._perm_cache[1]

    # --- the loop -----------------------------------------------------------------------------
    def step(self, *, callbacks=()) -> StepRecord:
        """One step: sample -> reward -> advantage -> update. On any error or interrupt nothing changes.
        ``callbacks``: objects with ``on_stage(trainer, stage, batch)``, called after each stage."""
        timer, callbacks = Timer(), check_hooks(callbacks)
        emit = lambda stage, b: [cb.on_stage(self, stage, b) for cb in callbacks]  # noqa: E731
        with self.rollback_on_error(), self._stepping(), self._old_logp_from_update():
            batch = self.rollout.step(timer, emit)        # Sampler, Rewarder (and DAPO's refills)
            if self.valuer is not None:
                with timer("credit"):
                    batch = self.valuer.step(batch)
            with timer("advantage"):
                batch = self.advantager.step(batch)
            emit("advantage", batch)
            with deferred_interrupt():  # Ctrl-C waits until the update is applied and recorded
                with timer("update"):
                    stats = self.updater.step(batch)
                if batch.old_logp is None:  # the update's own pi_old, recorded for the views and history
                    batch = batch.replace(old_logp=stats.old_logp)
                emit("update", batch)
                return self._commit(batch, stats, timer)

    @contextlib.contextmanager
    def _old_logp_from_update(self):
        """Skip the Sampler's recomputing forward for this step when nothing reads ``old_logp`` before an
        on-policy update (see ``Sampler``): the ratio is still exactly 1, one forward cheaper."""
        r = self.recipe
        skip = self.updater.on_policy and not (r.kl_in_reward and r.beta > 0) and not r.critic and not r.topk_logprobs
        self.sampler.recompute_old_logp = not skip
        try:
            yield
        finally:
            self.sampler.recompute_old_logp = True  # a stage run by hand shows old_logp as always

    @contextlib.contextmanager
    def _stepping(self):
        self._in_step = True
        try:
            yield
        finally:
            self._in_step = False

    def _commit(self, batch: Batch, stats: UpdateStats, timer: Timer) -> StepRecord:
        """Compute the step's metrics, then record them; the step counts only once it is in ``history``."""
        metrics = {"step": self.step_count + 1, **step_metrics(batch, stats), **timer.metrics()}
        sampled = self.rollout.zero_std_per_round
        if sampled:
            metrics["gen_rounds"] = len(sampled)
            metrics["frac_reward_zero_std_sampled"] = sum(sampled) / len(sampled)
        if "reward_errors" in batch.extras:  # reward_on_error="zero": entries scored 0 this step
            metrics["reward_errors"] = int(batch.extras["reward_errors"].sum())
        for ctl in self.controllers:
            metrics.update(ctl(batch, stats))
        metrics.update({f"hp/{name}": self.knob(name) for name in self.logged_knobs})
        record = StepRecord(batch, stats, metrics)
        self.history.append(metrics)
        self.records.append(record)
        self.step_count += 1
        return record

    def evaluate(self, n: int = 200, *, greedy: bool = True, k: int = 1, seed: int = EVAL_SEED) -> dict:
        """pass@1 (greedy or sampled) and pass@k on ``n`` held-out prompts."""
        r = self.recipe
        return evaluate(self.model, self.tokenizer, self.task, n=n, seed=seed, k=k, greedy=greedy,
                        max_new_tokens=r.max_new_tokens, temperature=r.temperature, top_p=r.top_p)

    def __repr__(self) -> str:
        return (f"Trainer(recipe={self.recipe.name!r}, task={self.task.name!r}, seed={self.seed}, "
                f"steps={self.step_count})")


check_vocab = check_model  # the old name
