"""``to_trl(recipe)``: the same recipe for TRL's ``GRPOTrainer`` (accelerate / DeepSpeed, many GPUs).

    exp = to_trl("dapo", prompts_per_step=2, num_generations=2)
    exp.config.loss_type, exp.config.epsilon_high       # ('dapo', 0.28)
    print(exp.report())      # what TRL cannot express, and what it expresses differently
    exp.trainer(model, tokenizer).train()

``trl`` is an optional extra (``pip install 'rlnb[trl]'``); ``rlnb.export.trl_mapping`` gives the same
mapping without it. ``tests/test_export_trl.py`` runs these against TRL.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from rlnb import recipes as recipes_mod
from rlnb import tasks as tasks_mod
from rlnb.algos import overlong_penalty
from rlnb.export.trl_map import Gap, TRLMapping, trl_mapping
from rlnb.recipe import Recipe
from rlnb.tasks.base import Task


def _text(completion) -> str:
    """A completion as text: TRL passes chat-formatted completions as a list of messages."""
    if isinstance(completion, list):
        return "".join(m.get("content", "") for m in completion if isinstance(m, dict))
    return completion


def text_reward(fn: Callable) -> Callable:
    """``fn(completions, answer, **kw)`` that also accepts TRL's chat-formatted completions."""

    def reward(completions, answer, **kw):
        return fn([_text(c) for c in completions], answer, **kw)

    reward.__name__ = fn.__name__  # TRL logs rewards/<name>/mean
    return reward


def overlong_reward(*, max_new_tokens: int, overlong_buffer: int) -> Callable:
    """DAPO's soft overlong penalty as a TRL reward function (``rlnb.algos.overlong_penalty``); TRL's
    ``completion_ids`` end with EOS, counted like rlnb's lengths."""

    def overlong(completions, completion_ids, **kw):
        lengths = torch.tensor([len(ids) for ids in completion_ids])
        return overlong_penalty(lengths, max_new_tokens=max_new_tokens, overlong_buffer=overlong_buffer).tolist()

    return overlong


@dataclass
class TRLExport:
    """A recipe as TRL sees it. ``config`` is a ``trl.GRPOConfig``; ``reward_funcs`` are the task's verifier
    parts (and the overlong penalty), weighted by ``config.reward_weights``; ``unsupported`` lists what TRL
    cannot express (the TRL run differs there), ``differences`` what it expresses with another
    convention, ``notes`` the conversions made. ``matched_recipe`` is the rlnb recipe moved to TRL's
    conventions where rlnb can follow them (e.g. eps 1e-4): run it with ``rlnb.Trainer`` for the closest
    single-GPU twin of the TRL run."""

    config: object                # trl.GRPOConfig
    reward_funcs: list[Callable]
    recipe: Recipe
    mapping: TRLMapping
    task: Task
    chat_template: bool = False
    system_prompt: str | None = None

    @property
    def unsupported(self) -> list[Gap]:
        return self.mapping.unsupported

    @property
    def differences(self) -> list[Gap]:
        return self.mapping.differences

    @property
    def notes(self) -> list[str]:
        return self.mapping.notes

    @property
    def matched_recipe(self) -> Recipe:
        return self.mapping.matched

    def dataset(self, n: int = 4096, *, seed: int = 0):
        """The prompt pool the rlnb Trainer draws from with this seed; chat messages with ``chat_template``."""
        ds = self.task.dataset(n, seed=f"train:{seed}")
        if not self.chat_template:
            return ds
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return ds.map(lambda row: {"prompt": system + [{"role": "user", "content": row["prompt"]}]})

    def trainer(self, model, tokenizer=None, *, train_dataset=None, **kwargs):
        """A ``trl.GRPOTrainer`` on ``model`` (a model, or a name/folder loaded in fp32 with ``rlnb.load``)."""
        from trl import GRPOTrainer

        if isinstance(model, (str, Path)):
            from rlnb.models import load

            model, loaded = load(model)
            tokenizer = tokenizer or loaded
        if tokenizer is None:
            raise ValueError("tokenizer: expected the model's tokenizer when model is a model object")
        return GRPOTrainer(model=model, reward_funcs=self.reward_funcs, args=self.config,
                           train_dataset=train_dataset if train_dataset is not None else self.dataset(),
                           processing_class=tokenizer, **kwargs)

    def report(self) -> str:
        """Plain text: the TRL loss, then every gap between the rlnb recipe and the TRL run."""
        c, m = self.config, self.mapping
        head = (f"recipe {self.recipe.name!r} -> trl.GRPOConfig(loss_type={c.loss_type!r}, "
                f"importance_sampling_level={c.importance_sampling_level!r}, scale_rewards={c.scale_rewards!r}, "
                f"epsilon={c.epsilon}, epsilon_high={c.epsilon_high}, beta={c.beta})")
        return head + "\n" + m.report().split("\n", 1)[1]

    def __str__(self) -> str:
        return self.report()


def to_trl(recipe: str | Recipe = "grpo", task="add", *, steps: int | None = None, output_dir: str = "runs/trl",
           num_processes: int = 1, gradient_accumulation_steps: int = 1, chat_template: bool = False,
           system_prompt: str | None = None, strict: bool = False, seed: int = 0, trl_args: dict | None = None,
           **overrides) -> TRLExport:
    """``recipe`` (a name or a Recipe, with ``overrides`` of its fields) as a ``trl.GRPOConfig`` and TRL
    reward functions for ``task``.

    One rlnb step (P prompts x G completions, ``num_mini_batches`` optimizer steps) is one TRL generation
    batch split over ``num_processes`` GPUs and ``gradient_accumulation_steps``; ``steps`` rlnb steps are
    ``max_steps`` = steps x num_mini_batches x num_iterations TRL optimizer steps. ``trl_args`` are more
    ``GRPOConfig`` fields (``gradient_checkpointing``, ``save_steps``, ...), applied last.
    ``strict=True`` raises instead of listing what TRL cannot express.
    """
    from trl import GRPOConfig

    r = recipes_mod.get(recipe, **overrides)
    m = trl_mapping(r, num_processes=num_processes, gradient_accumulation_steps=gradient_accumulation_steps)
    if strict and m.unsupported:
        raise ValueError(f"recipe {r.name!r}: TRL cannot express " + "; ".join(map(str, m.unsupported)))
    cuda = torch.cuda.is_available()
    kwargs = dict(output_dir=output_dir, seed=seed, logging_steps=1, report_to="none", save_strategy="no", bf16=cuda,
                  dataloader_pin_memory=cuda, reward_weights=list(m.reward_weights.values()), **m.kwargs)
    if steps is not None:
        kwargs["max_steps"] = steps * r.num_mini_batches * r.num_iterations
    for key, value in (trl_args or {}).items():
        if key in m.kwargs and m.kwargs[key] != value:
            m.notes.append(f"trl_args: {key}={value!r} replaces the recipe's {m.kwargs[key]!r}")
        kwargs[key] = value
    the_task = tasks_mod.get(task)
    funcs = the_task.reward_funcs()
    reward_funcs = [text_reward(funcs[name]) for name in m.reward_weights if name != "overlong"]
    if "overlong" in m.reward_weights:
        reward_funcs.append(overlong_reward(max_new_tokens=r.max_new_tokens, overlong_buffer=r.overlong_buffer))
    return TRLExport(GRPOConfig(**kwargs), reward_funcs, r, m, the_task, chat_template, system_prompt)
