"""``to_verl(recipe)``: the same recipe for verl 0.9.1's PPO trainer (Ray, FSDP, vLLM; many GPUs and nodes).

    exp = to_verl("dapo", "gsm8k", model="Qwen/Qwen2.5-0.5B-Instruct", chat_template=True)
    print(exp.command())     # python -m verl.trainer.main_ppo algorithm.adv_estimator=grpo ...
    print(exp.report())      # what verl cannot express, and what it expresses differently
    exp.write_data()         # the task's prompts as the parquet files the command reads

Building the export needs no verl; running the command needs ``pip install 'rlnb[verl]'`` and GPUs.
``tests/test_export_verl.py`` composes the overrides with verl's own config files and checks the loss and
advantage against verl's own functions.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from rlnb import recipes as recipes_mod
from rlnb import tasks as tasks_mod
from rlnb.export.trl_map import Gap
from rlnb.export.verl_map import A, VerlMapping, hydra_overrides, verl_mapping
from rlnb.recipe import Recipe
from rlnb.tasks.base import Task

REWARD_FN = Path(__file__).with_name("verl_reward.py")


@dataclass
class VerlExport:
    """A recipe as verl sees it: ``overrides`` (config key -> value: the recipe's, then the run's) for
    ``python -m verl.trainer.main_ppo``, the data it reads, and the gaps (``unsupported``, ``differences``,
    ``notes``, as ``to_trl``'s)."""

    recipe: Recipe
    mapping: VerlMapping
    task: Task
    overrides: dict
    data_dir: Path
    chat_template: bool = False
    system_prompt: str | None = None
    run_gaps: list[Gap] = field(default_factory=list)

    @property
    def unsupported(self) -> list[Gap]:
        return self.mapping.unsupported + self.run_gaps

    @property
    def differences(self) -> list[Gap]:
        return self.mapping.differences

    @property
    def notes(self) -> list[str]:
        return self.mapping.notes

    def args(self) -> list[str]:
        """The Hydra overrides, one ``key=value`` string each."""
        return hydra_overrides(self.overrides)

    def command(self, python: str = "python") -> str:
        """The exact shell command that runs this export."""
        return shlex.join([python, "-m", "verl.trainer.main_ppo", *self.args()])

    def rows(self, n: int, *, seed: int = 0, split: str = "train") -> list[dict]:
        """``n`` prompts in verl's RL layout: ``prompt`` (chat messages), ``data_source``, ``reward_model``
        (``ground_truth``), ``extra_info`` (the task's name and the reward weights the reward function reads)."""
        ds = self.task.dataset(n, seed=f"{split}:{seed}")
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        weights = {"correct": 1.0, "format": self.recipe.format_weight}
        return [{"data_source": f"rlnb/{self.task.name}", "ability": self.task.name,
                 "prompt": system + [{"role": "user", "content": row["prompt"]}],
                 "reward_model": {"style": "rule", "ground_truth": str(row["answer"])},
                 "extra_info": {"split": split, "index": i, "task": self.task.name, "weights": weights}}
                for i, row in enumerate(ds)]

    def write_data(self, n_train: int = 4096, n_val: int = 256, *, seed: int = 0) -> tuple[Path, Path]:
        """Write ``train.parquet`` and ``val.parquet`` under ``data_dir`` (the files the command names)."""
        import pandas as pd

        self.data_dir.mkdir(parents=True, exist_ok=True)
        paths = (self.data_dir / "train.parquet", self.data_dir / "val.parquet")
        for path, n, split in ((paths[0], n_train, "train"), (paths[1], n_val, "val")):
            pd.DataFrame(self.rows(n, seed=seed, split=split)).to_parquet(path)
        return paths

    def report(self) -> str:
        """Plain text: verl's algorithm settings, then every gap between the rlnb recipe and the verl run."""
        m = VerlMapping(self.overrides, self.unsupported, self.differences, self.notes)
        return f"recipe {self.recipe.name!r} -> " + m.report()

    def __str__(self) -> str:
        return self.report()


def _run_overrides(r: Recipe, *, model: str, steps: int | None, n_gpus: int, nnodes: int, micro_batch: int,
                   rollout: str, tensor_parallel: int, max_prompt_length: int, data_dir: Path, seed: int) -> dict:
    """What the recipe does not say: the model, the data, the machines, the micro-batches, the reward function."""
    out = {"actor_rollout_ref.model.path": model, "data.train_files": str(data_dir / "train.parquet"),
           "data.val_files": str(data_dir / "val.parquet"), "data.max_prompt_length": max_prompt_length,
           "data.seed": seed, A + "ppo_micro_batch_size_per_gpu": micro_batch,
           "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": micro_batch,
           "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": micro_batch,
           "actor_rollout_ref.rollout.name": rollout, "actor_rollout_ref.rollout.tensor_model_parallel_size":
           tensor_parallel, "trainer.n_gpus_per_node": n_gpus, "trainer.nnodes": nnodes,
           "trainer.logger": ["console"], "reward.custom_reward_function.path": str(REWARD_FN),
           "reward.custom_reward_function.name": "compute_score"}
    if steps is not None:
        out["trainer.total_training_steps"] = steps
    if r.critic:
        out.update({"critic.model.path": model, "critic.ppo_micro_batch_size_per_gpu": micro_batch,
                    "critic.optim.lr": r.lr})
    return out


def to_verl(recipe: str | Recipe = "grpo", task="add", *, model: str | None = None, steps: int | None = None,
            n_gpus: int = 1, nnodes: int = 1, micro_batch: int = 4, rollout: str = "vllm", tensor_parallel: int = 1,
            max_prompt_length: int = 512, data_dir: str | Path = "runs/verl-data", chat_template: bool = False,
            system_prompt: str | None = None, strict: bool = False, seed: int = 0, verl_args: dict | None = None,
            **overrides) -> VerlExport:
    """``recipe`` (a name or a Recipe, with ``overrides`` of its fields) as verl 0.9.1 overrides for ``task``.

    One rlnb step (P prompts x G completions, ``num_mini_batches`` optimizer steps per epoch) is one verl
    training step; ``steps`` sets ``trainer.total_training_steps``. ``model`` defaults to rlnb's embedded default
    (a Hugging Face folder). ``verl_args`` are more config keys (``{"trainer.save_freq": 100}``), applied last.
    ``strict=True`` raises instead of listing what verl cannot express.
    """
    r = recipes_mod.get(recipe, **overrides)
    m = verl_mapping(r)
    the_task = tasks_mod.get(task)
    if model is None:
        from rlnb.models import DEFAULT_DIR

        model = str(DEFAULT_DIR)
    for name, v in (("n_gpus", n_gpus), ("nnodes", nnodes), ("micro_batch", micro_batch),
                    ("tensor_parallel", tensor_parallel), ("max_prompt_length", max_prompt_length)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name}: expected a positive int, got {v!r}")
    data_dir = Path(data_dir).resolve()  # verl's workers read it from their own working directory
    run = _run_overrides(r, model=model, steps=steps, n_gpus=n_gpus, nnodes=nnodes, micro_batch=micro_batch,
                         rollout=rollout, tensor_parallel=tensor_parallel, max_prompt_length=max_prompt_length,
                         data_dir=data_dir, seed=seed)
    run_gaps = [] if chat_template else [Gap("chat_template", False, "verl wraps every prompt in the tokenizer's "
                                             "chat template (its dataset keeps prompts as chat messages); use an "
                                             "instruct model with a template")]
    if strict and m.unsupported + run_gaps:
        raise ValueError(f"recipe {r.name!r}: verl cannot express " + "; ".join(map(str, m.unsupported + run_gaps)))
    merged = {**m.overrides, **run}
    for key, value in (verl_args or {}).items():
        if key in merged and merged[key] != value:
            m.notes.append(f"verl_args: {key}={value!r} replaces {merged[key]!r}")
        merged[key] = value
    return VerlExport(r, m, the_task, merged, data_dir, chat_template, system_prompt, run_gaps)
