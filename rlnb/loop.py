"""``Trainer``: builds the four stages from a ``Recipe`` and runs sample -> reward -> advantage -> update."""

from __future__ import annotations

import contextlib
import copy
from collections import deque

import torch

from rlnb import recipes as recipes_mod
from rlnb import tasks as tasks_mod
from rlnb.batch import Batch
from rlnb.core import forward_options
from rlnb.core.checks import check_trainer_args
from rlnb.core.forward_options import ForwardOptions
from rlnb.core.runtime import Timer, check_hooks, hash_seed
from rlnb.recipe import Recipe
from rlnb.run import checkpoint, owner
from rlnb.run.controllers import build_controllers
from rlnb.run.driver import run_steps
from rlnb.run.evaluate import evaluate
from rlnb.run.state import RunState, rollback_on_error
from rlnb.stages import Rewarder, UpdateStats
from rlnb.stages.build import build_optimizer, build_stages, pass_rates_for
from rlnb.stages.prompts import PromptPool
from rlnb.stages.reconfigure import knob_value, reference_for, running_hyperparameters, swap_recipe
from rlnb.stages.runner import StageRunner
from rlnb.stages.step import StepRecord, old_logp_from_update, record_metrics, run_stages

EVAL_SEED = 10_000  # held-out prompts; training prompts come from a pool seeded "train:<seed>"
KEEP_START_PARAMS = 50_000_000  # keep a CPU copy of the starting weights (a reference for beta > 0 later) up to this


class Trainer:
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
    ``reward_time_limit``: seconds a reward function call may take (None, the default: no limit); a call
    that overruns is an error of that function, handled as ``reward_on_error`` says.
    ``forward``: how the forwards run (``ForwardOptions``: kernel backend, LM-head path, padding; default: those
    in force in the calling thread now). Every step runs with them, whichever thread steps it; only
    ``set_forward_options`` changes them.
    """

    def __init__(self, model, tokenizer, task="add", recipe: str | Recipe = "grpo", *, seed: int = 0,
                 ref_model=None, pool_size: int = 4096, keep_records: int = 64, safe_update: bool = True,
                 reward_on_error: str = "raise", reward_time_limit: float | None = None,
                 forward: ForwardOptions | None = None, **overrides):
        check_trainer_args(model, tokenizer, seed=seed, ref_model=ref_model, pool_size=pool_size,
                           keep_records=keep_records, safe_update=safe_update, reward_on_error=reward_on_error,
                           reward_time_limit=reward_time_limit)
        self.reward_on_error, self.pool_size = reward_on_error, pool_size  # saved with checkpoints
        self.reward_time_limit = reward_time_limit
        if forward is not None and not isinstance(forward, ForwardOptions):
            raise TypeError(f"forward: expected ForwardOptions or None, got {type(forward).__name__}")
        self.forward_options = forward if forward is not None else forward_options.current()
        self.forward_changes: list[tuple[int, ForwardOptions, ForwardOptions]] = []  # (first step, old, new)
        self.recipe = recipes_mod.get(recipe, **overrides)
        self.task = tasks_mod.get(task)
        self.model, self.tokenizer, self.seed, self.safe_update = model, tokenizer, int(seed), safe_update
        self.pool = self.task.dataset(pool_size, seed=f"train:{seed}")
        self.prompts = PromptPool(self.pool, self.seed)
        self.step_count, self.history = 0, []
        self.run_target: int | None = None  # the step an interrupted run() finishes at
        self._in_step = False               # set while a step runs: knobs change only between steps
        self.records: deque[StepRecord] = deque(maxlen=keep_records)
        self.ref_model = None
        if ref_model is not None or self.recipe.beta > 0:
            self.use_reference(ref_model if ref_model is not None else "copy")
        device = next(model.parameters()).device  # sampling draws on the model's device; shuffling on the CPU
        self.generators = {name: torch.Generator(device=device if name != "update" else "cpu").manual_seed(
            hash_seed(seed, name)) for name in ("sample", "update", "dropout", "credit")}  # dropout: see run/state
        small = sum(p.numel() for p in model.parameters()) <= KEEP_START_PARAMS
        self._start_weights = ({k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
                               if small and self.ref_model is None else None)  # for reconfigure(beta=...) mid-run
        self.logged_knobs: tuple[str, ...] = ()  # knobs written to every step's metrics as hp/<name>
        self._build_optimizer()
        self._build_stages()

    @classmethod
    def tiny(cls, recipe: str | Recipe = "grpo", task="add", *, seed: int = 0, **overrides) -> Trainer:
        """A trainer on the embedded default model (about 1M parameters; runs on a laptop CPU)."""
        from rlnb.models import load_default

        model, tokenizer = load_default()
        return cls(model, tokenizer, task, recipe, seed=seed, **overrides)

    @classmethod
    def from_pretrained(cls, name_or_path, task="add", recipe: str | Recipe = "grpo", **kwargs) -> Trainer:
        """A trainer on any Hugging Face causal LM (a name, or a local folder offline): bf16 on CUDA,
        gradient checkpointing, LoRA, chat templates. Options: ``rlnb.models.pretrained.from_pretrained``."""
        from rlnb.models.pretrained import from_pretrained

        return from_pretrained(cls, name_or_path, task=task, recipe=recipe, **kwargs)

    # --- construction: registry names are resolved here, once ---------------------------------
    def _build_optimizer(self) -> None:
        self.value_head, self.optimizer, self.scheduler = build_optimizer(self.recipe, self.model)

    def _build_stages(self) -> None:
        """The stages from ``self.recipe`` (``rlnb.stages.build``); rebuilt by ``reconfigure``."""
        r = self.recipe
        self.pass_rates = pass_rates_for(r, getattr(self, "pass_rates", None))
        st = build_stages(r, model=self.model, tokenizer=self.tokenizer, task=self.task, ref_model=self.ref_model,
                          value_head=self.value_head, optimizer=self.optimizer, scheduler=self.scheduler,
                          generators=self.generators, reward_on_error=self.reward_on_error, pass_rates=self.pass_rates,
                          reward_time_limit=self.reward_time_limit)
        self.sampler, self.rewarder, self.refill, self.valuer, self.advantager, self.updater = (
            st.sampler, st.rewarder, st.refill, st.valuer, st.advantager, st.updater)
        self.controllers = build_controllers(r, self)

    def hyperparameters(self) -> dict[str, dict]:
        """What actually runs, per stage (``"advantage"``, ``"loss"``, ``"aggregation"``, ``"kl"``,
        ``"filters"``, then the other groups): ``{knob: value}``, with each knob the recipe leaves unset
        resolved to the chosen entry's own default, and beta and the entropy coefficient as the
        controllers have set them now."""
        return running_hyperparameters(self.recipe, self.rewarder, self.updater)

    def knob(self, name: str):
        """The value knob ``name`` runs with now (see ``hyperparameters``); a knob no chosen entry takes
        reports the recipe's own value (UNSET when left to an entry)."""
        return knob_value(self.hyperparameters(), self.recipe, name)

    def reconfigure(self, **changes) -> Recipe:
        """Change knobs between steps, keeping the weights, optimizer state, random streams and history:
        the recipe is replaced (validated first: a bad value raises naming the knob and changes nothing),
        the stages are rebuilt, and the optimizer's learning rate, warm-up and weight decay follow.
        Turning beta on mid-run uses the model the run started from as the reference. Returns the new
        recipe. ``critic`` cannot change mid-run (it adds a value head to the optimizer)."""
        owner.check(self, "reconfigure")
        return self.set_recipe(self.recipe.replace(**changes))                # raises before anything changes

    def set_recipe(self, new: Recipe) -> Recipe:
        """Run with recipe ``new`` from the next step (what ``reconfigure`` does with its changes)."""
        owner.check(self, "set_recipe")
        return swap_recipe(self, new, in_step=self._in_step, rebuild=self._build_stages)  # rlnb.stages.reconfigure

    def log_knobs(self, *names: str) -> tuple[str, ...]:
        """Write knobs ``names`` to every step's metrics as ``hp/<name>`` from now on (besides those logged
        already; what a lab does for its controls). Returns all logged knobs."""
        owner.check(self, "log_knobs")
        unknown = [n for n in names if n not in self.recipe.knobs()]
        if unknown:
            raise ValueError(f"names: {unknown} are not Recipe knobs; known: {sorted(self.recipe.knobs())}")
        self.logged_knobs = tuple(dict.fromkeys((*self.logged_knobs, *names)))
        return self.logged_knobs

    def set_forward_options(self, **changes) -> ForwardOptions:
        """Run the forwards with ``changes`` (``backend=``, ``lm_head=``, ``padding=``) from the next step on,
        recorded in ``forward_changes`` as (first step, old, new). Refused while another thread drives the
        trainer, and inside a step. A ``with padding(...)`` block never reaches a trainer's steps: this does."""
        owner.check(self, "set_forward_options")
        if self._in_step:
            raise RuntimeError("set_forward_options: called during a step; options change between steps")
        new = self.forward_options.replace(**changes)                  # raises naming a bad option
        if new != self.forward_options:
            self.forward_changes.append((self.step_count + 1, self.forward_options, new))
            self.forward_options = new
        return new

    def use_reference(self, ref_model="start", *, rebuild: bool = True):
        """Set the KL reference, the one place a reference model is set: a model, ``"copy"`` (a frozen copy
        of the policy now), ``"start"`` (the policy as the run started, from the weights kept at
        construction; models up to ``KEEP_START_PARAMS``), or None (no reference). Returns it."""
        owner.check(self, "use_reference")
        start = getattr(self, "_start_weights", None)  # not kept yet while __init__ sets the first reference
        self.ref_model = reference_for(ref_model, self.model, start, limit=KEEP_START_PARAMS)
        if rebuild and hasattr(self, "sampler"):
            self._build_stages()
        return self.ref_model

    # --- the run's state: the only code that reads or writes it (see rlnb.run.state) ---------------
    def modules(self) -> list:
        """The trainable modules: the policy, and the value head when there is a critic."""
        return [self.model] + ([self.value_head] if self.value_head is not None else [])

    def state(self) -> RunState:
        """Where the run stands, besides weights, optimizer and scheduler (``RunState``)."""
        return RunState(
            step=self.step_count, prompts_drawn=self.prompts_drawn, run_target=self.run_target,
            rng={k: g.get_state() for k, g in self.generators.items()},
            pass_rates=None if self.pass_rates is None else copy.deepcopy(self.pass_rates.state_dict()),
            controllers=[c.state() for c in self.controllers], reward_errors=self.rewarder.errors,
            task_state=copy.deepcopy(self.task.state()), logged_knobs=tuple(self.logged_knobs),
            training=self.model.training, history=list(self.history), start_weights=self._start_weights)

    def set_state(self, s: RunState) -> None:
        """Put the run where ``s`` says (history is replaced in place, so a list a notebook holds follows)."""
        owner.check(self, "set_state")
        if not isinstance(s, RunState):
            raise TypeError(f"state: expected a RunState (from Trainer.state()), got {type(s).__name__}")
        for k, rng in s.rng.items():
            self.generators[k].set_state(rng)
        self.step_count, self.prompts.drawn, self.run_target = s.step, s.prompts_drawn, s.run_target
        if self.pass_rates is not None and s.pass_rates is not None:
            self.pass_rates.load_state_dict(copy.deepcopy(s.pass_rates))
        for ctl, value in zip(self.controllers, s.controllers):
            ctl.set(value)
        self.rewarder.errors = s.reward_errors
        if s.task_state is not None:
            self.task.set_state(copy.deepcopy(s.task_state))
        self.logged_knobs = tuple(s.logged_knobs)
        self.model.train(s.training)
        self.history[:] = s.history
        self._start_weights = s.start_weights

    # --- run, save, load --------------------------------------------------------------------------
    def run(self, steps: int | None = None, *, callbacks=(), progress: bool = True) -> list[dict]:
        """Train ``steps`` more steps. After a KeyboardInterrupt, ``run()`` with no argument finishes the
        interrupted run. Each callback is called as ``cb(trainer, record)`` after every step; a callback
        with a method ``on_stage(trainer, stage, batch)`` is also called inside the step, after each stage
        ("sample", "reward", "advantage", "update"; the step commits after "update"). An error or
        KeyboardInterrupt inside a step leaves the trainer as it was before that step.
        Returns ``self.history``."""
        owner.check(self, "run")
        return run_steps(self, steps, callbacks=callbacks, progress=progress)

    def save(self, directory):
        """Everything that defines the run and where it stands, written atomically: model, reference,
        optimizer, scheduler, recipe, task and the ``RunState`` (``rlnb.run.checkpoint`` lists the files).
        Refuses a ``directory`` that is a file or a folder holding anything but an rlnb checkpoint."""
        owner.check(self, "save")
        return checkpoint.save(self, directory)

    @classmethod
    def load(cls, directory, *, task=None, device=None, **options):
        """A trainer that continues exactly where ``save`` left off: ``run(a)`` + save + load + ``run(b)``
        gives the history and weights of ``run(a + b)``, bit for bit. ``options``: ``keep_records``,
        ``safe_update``, ``reward_on_error`` and recipe knobs (``lr=1e-2``, applied with ``reconfigure`` once the
        run is restored); ``seed``, ``pool_size``, ``recipe`` and ``ref_model`` would make it another run and
        are refused by name. ``task``: a task the checkpoint cannot rebuild (a custom class); ``device``:
        default the saved one (another device type continues with fresh sampling streams: not bit-exact)."""
        return checkpoint.load(cls, directory, task=task, device=device, **options)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    # --- prompts ------------------------------------------------------------------------------
    @property
    def prompts_drawn(self) -> int:
        """Prompts drawn from the training pool so far (the pool's cursor)."""
        return self.prompts.drawn

    def next_prompts(self) -> Batch:
        """The next P prompts of the training pool (a fresh permutation each pass), G times each.
        Prompts retired by no-positive-resampling are skipped."""
        owner.check(self, "next_prompts")  # it moves the prompt cursor
        return self.prompts.next(self.recipe.prompts_per_step, self.recipe.num_generations, self.pass_rates)

    # --- the loop -----------------------------------------------------------------------------
    def step(self, *, callbacks=()) -> StepRecord:
        """One step: sample -> reward (-> refill) -> advantage -> update. On any error or interrupt nothing
        changes. ``callbacks``: objects with ``on_stage(trainer, stage, batch)``, called after each stage."""
        owner.check(self, "step")
        stage = StageRunner(self, check_hooks(callbacks))
        with forward_options.using(self.forward_options), rollback_on_error(self), self._stepping(), \
                old_logp_from_update(self):
            return run_stages(self, stage, self._commit)    # rlnb.stages.step: the stages in order

    def rollout(self) -> Batch:
        """The step's first stages on the next prompts, without the update: sample, reward and (DAPO) refill."""
        owner.check(self, "rollout")
        stage = StageRunner(self, [])
        with forward_options.using(self.forward_options):
            return self.refill.step(stage.next_round(), more=stage.next_round)

    @contextlib.contextmanager
    def _stepping(self):
        self._in_step = True
        try:
            yield
        finally:
            self._in_step = False

    def _commit(self, batch: Batch, stats: UpdateStats, timer: Timer) -> StepRecord:
        """Compute the step's metrics, then record them; the step counts only once it is in ``history``."""
        record = StepRecord(batch, stats, record_metrics(self, batch, stats, timer))
        self.history.append(record.metrics)
        self.records.append(record)
        self.step_count += 1
        return record

    def evaluate(self, n: int = 200, *, greedy: bool = True, k: int = 1, seed: int = EVAL_SEED) -> dict:
        """pass@1 (greedy or sampled) and pass@k on ``n`` held-out prompts."""
        owner.check(self, "evaluate")  # it switches the model to eval mode while it runs
        r = self.recipe
        with forward_options.using(self.forward_options):
            return evaluate(self.model, self.tokenizer, self.task, n=n, seed=seed, k=k, greedy=greedy,
                            max_new_tokens=r.max_new_tokens, temperature=r.temperature, top_p=r.top_p,
                            rewarder=Rewarder.for_task(self.task, on_error=self.reward_on_error,  # its own error
                                                       time_limit=self.reward_time_limit))  # count, not training's

    def __repr__(self) -> str:
        return (f"Trainer(recipe={self.recipe.name!r}, task={self.task.name!r}, seed={self.seed}, "
                f"steps={self.step_count})")


