"""``Trainer``: builds the four stages from a ``Recipe`` and runs sample -> reward -> advantage -> update."""

from __future__ import annotations

import copy
import time
from collections import deque
from dataclasses import dataclass

import torch

from rlnb import recipes as recipes_mod
from rlnb import tasks as tasks_mod
from rlnb.algos import ADVANTAGES, AGGREGATIONS, KL_ESTIMATORS, POLICY_LOSSES, bind
from rlnb.batch import Batch
from rlnb.evaluate import evaluate
from rlnb.metrics import step_metrics
from rlnb.recipe import Recipe
from rlnb.stages import Advantager, Rewarder, Sampler, Updater, UpdateStats, make_optimizer
from rlnb.trainer_state import TrainerStateMixin, deferred_interrupt

EVAL_SEED = 10_000  # held-out prompts; training prompts come from a pool seeded "train:<seed>"


@dataclass(frozen=True)
class StepRecord:
    """What one step produced: the final batch, the update's stats, and the metrics written to history."""

    batch: Batch
    stats: UpdateStats
    metrics: dict


class Trainer(TrainerStateMixin):
    """Run a recipe on a model and a task, one inspectable step at a time.

    >>> trainer = Trainer.tiny("grpo", task="add", seed=0)      # doctest: +SKIP
    >>> record = trainer.step()                                  # doctest: +SKIP
    >>> trainer.run(50)                                          # doctest: +SKIP
    """

    def __init__(self, model, tokenizer, task="add", recipe: str | Recipe = "grpo", *, seed: int = 0,
                 ref_model=None, pool_size: int = 4096, keep_records: int = 64, **overrides):
        self.recipe = recipes_mod.get(recipe, **overrides) if isinstance(recipe, str) else recipe.replace(**overrides)
        self.task = tasks_mod.get(task)
        self.model, self.tokenizer, self.seed = model, tokenizer, int(seed)
        check_vocab(model, tokenizer)
        self.pool = self.task.dataset(pool_size, seed=f"train:{seed}")
        self.step_count, self.history = 0, []
        self.records: deque[StepRecord] = deque(maxlen=keep_records)
        if self.recipe.beta > 0 and ref_model is None:
            ref_model = copy.deepcopy(model).eval().requires_grad_(False)
        self.ref_model = ref_model
        self.generators = {name: torch.Generator().manual_seed(hash_seed(seed, name)) for name in ("prompts", "sample", "update")}
        self._build_stages()
        self._run_target = None

    @classmethod
    def tiny(cls, recipe: str | Recipe = "grpo", task="add", *, seed: int = 0, **overrides) -> Trainer:
        """A trainer on the embedded default model (about 1M parameters; runs on a laptop CPU)."""
        from rlnb.models import load_default

        model, tokenizer = load_default()
        return cls(model, tokenizer, task, recipe, seed=seed, **overrides)

    # --- construction: registry names are resolved here, once ---------------------------------
    def _build_stages(self) -> None:
        r = self.recipe
        self.optimizer, self.scheduler = make_optimizer(self.model, lr=r.lr, weight_decay=r.weight_decay,
                                                        warmup_steps=r.warmup_steps)
        self.sampler = Sampler(self.model, self.tokenizer, temperature=r.temperature, top_p=r.top_p,
                               max_new_tokens=r.max_new_tokens, ref_model=self.ref_model,
                               generator=self.generators["sample"])
        self.rewarder = Rewarder.for_task(self.task, format_weight=r.format_weight)
        self.advantager = Advantager(bind(ADVANTAGES[r.advantage], r))
        self.updater = Updater(
            self.model, self.optimizer, self.scheduler, loss_fn=bind(POLICY_LOSSES[r.loss], r),
            agg_fn=bind(AGGREGATIONS[r.aggregation], r), kl_fn=bind(KL_ESTIMATORS[r.kl_estimator], r),
            beta=r.beta, entropy_coef=r.entropy_coef, temperature=r.temperature,
            num_iterations=r.num_iterations, num_mini_batches=r.num_mini_batches,
            max_grad_norm=r.max_grad_norm, generator=self.generators["update"],
        )

    # --- the loop -----------------------------------------------------------------------------
    def next_prompts(self) -> Batch:
        """The next P prompts from the training pool (a fresh permutation each pass), G times each."""
        P, n = self.recipe.prompts_per_step, len(self.pool)
        start = self.step_count * P
        idx = torch.cat([self._perm(epoch) for epoch in range(start // n, (start + P - 1) // n + 1)])
        idx = idx[start % n : start % n + P]
        return Batch.from_rows(self.pool[idx.tolist()], self.recipe.num_generations, prompt_index=idx)

    def _perm(self, epoch: int) -> torch.Tensor:
        return torch.randperm(len(self.pool), generator=torch.Generator().manual_seed(hash_seed(self.seed, f"epoch{epoch}")))

    def step(self) -> StepRecord:
        """One step: sample -> reward -> advantage -> update. On any error nothing changes."""
        timer = Timer()
        with self.rollback_on_error():
            with timer("sample"):
                batch = self.sampler.step(self.next_prompts())
            with timer("reward"):
                batch = self.rewarder.step(batch)
            with timer("advantage"):
                batch = self.advantager.step(batch)
            with deferred_interrupt():  # Ctrl-C waits until the update is applied and recorded
                with timer("update"):
                    stats = self.updater.step(batch)
                return self._commit(batch, stats, timer)

    def _commit(self, batch: Batch, stats: UpdateStats, timer: Timer) -> StepRecord:
        self.step_count += 1
        metrics = {"step": self.step_count, **step_metrics(batch, stats), **timer.metrics()}
        record = StepRecord(batch, stats, metrics)
        self.history.append(metrics)
        self.records.append(record)
        return record

    def evaluate(self, n: int = 200, *, greedy: bool = True, k: int = 1, seed: int = EVAL_SEED) -> dict:
        """pass@1 (greedy or sampled) and pass@k on ``n`` held-out prompts."""
        r = self.recipe
        return evaluate(self.model, self.tokenizer, self.task, n=n, seed=seed, k=k, greedy=greedy,
                        max_new_tokens=r.max_new_tokens, temperature=r.temperature, top_p=r.top_p)

    def __repr__(self) -> str:
        return (f"Trainer(recipe={self.recipe.name!r}, task={self.task.name!r}, seed={self.seed}, "
                f"steps={self.step_count})")


class Timer:
    """Wall time per stage, as ``timing/<stage>_s`` metrics."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    def __call__(self, stage: str):
        timer = self

        class _Ctx:
            def __enter__(self):
                self.t0 = time.perf_counter()

            def __exit__(self, *exc):
                timer.seconds[stage] = time.perf_counter() - self.t0

        return _Ctx()

    def metrics(self) -> dict[str, float]:
        return {f"timing/{k}_s": round(v, 4) for k, v in self.seconds.items()}


def hash_seed(seed: int, name: str) -> int:
    """A stable 63-bit seed for one named random stream (Python's hash() is salted per process)."""
    import hashlib

    return int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:8], "little") >> 1


def check_vocab(model, tokenizer) -> None:
    """The tokenizer's ids must all exist in the model's embedding table."""
    n_model = model.get_input_embeddings().weight.shape[0]
    if len(tokenizer) > n_model:
        raise ValueError(f"tokenizer: has {len(tokenizer)} tokens but the model's embedding has only {n_model} rows; "
                         "they do not belong together")
