"""Group size G at the mechanism level: what a bigger group buys (signal, a steadier baseline) and costs.

Sample M completions for each of N held-out prompts once, with the starting model. For each G, cut each
prompt's M samples into M / G disjoint groups and measure:

- ``zero_std_share``: groups whose rewards are all equal, which GRPO gives zero advantage (no signal);
  predicted mean_i p_i^G + (1 - p_i)^G with p_i the prompt's pass rate over all M samples;
- ``baseline_rmse``: RMS error of the group mean (the baseline each sample's advantage subtracts)
  against p_i; predicted sqrt(mean_i p_i (1 - p_i) (M - G) / (G (M - 1))) (a mean of G drawn without
  replacement from the M samples);
- ``seconds_per_step``: the median wall time of a GRPO step with P prompts and this G.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

import torch

from rlnb.run.evaluate import completions_for
from rlnb.studies.probes import baseline_error, predicted_zero_std_share, zero_std_share


@dataclass
class GroupSizeResult:
    """One row per G (see the module docstring for the columns) and the settings."""

    rows: list[dict]
    config: dict

    def column(self, name: str) -> list[float]:
        return [r[name] for r in self.rows]

    def to_markdown(self, digits: int = 3) -> str:
        cols = list(self.rows[0])
        lines = ["| " + " | ".join(cols) + " |", "|---" * len(cols) + "|"]
        fmt = lambda v: f"{v:.{digits}f}" if isinstance(v, float) else str(v)  # noqa: E731
        lines += ["| " + " | ".join(fmt(r[c]) for c in cols) + " |" for r in self.rows]
        return "\n".join(lines)

    def to_json(self, path=None) -> str:
        text = json.dumps(asdict(self))
        if path is not None:
            from pathlib import Path

            Path(path).write_text(text)
        return text

    def __str__(self) -> str:
        return self.to_markdown()

    def _repr_markdown_(self) -> str:
        return self.to_markdown()


def correctness_matrix(task, *, n_prompts: int, samples_per_prompt: int, seed: int = 0, temperature: float = 1.0,
                       max_new_tokens: int = 32, model=None, tokenizer=None) -> torch.Tensor:
    """(N, M) bool: whether each of M sampled completions of each of N held-out prompts is correct."""
    from rlnb import tasks as tasks_mod
    from rlnb.loop import EVAL_SEED
    from rlnb.models import load_default

    task = tasks_mod.get(task)
    if model is None:
        model, tokenizer = load_default()
    ds = task.dataset(n_prompts, seed=EVAL_SEED + 1 + seed)
    gen = torch.Generator().manual_seed(seed)
    model.eval()
    outs = completions_for(model, tokenizer, ds["prompt"], max_new_tokens=max_new_tokens, n=samples_per_prompt,
                           greedy=False, temperature=temperature, generator=gen)
    return torch.tensor([[task.reward(c, a).parts["correct"] > 0 for c in o] for o, a in zip(outs, ds["answer"])])


def step_seconds(task, *, G: int, prompts_per_step: int, steps: int, seed: int = 0) -> float:
    """Median wall time of ``steps`` GRPO steps at this G (one warm-up step first)."""
    from rlnb.core.runtime import median_step_seconds
    from rlnb.loop import Trainer

    trainer = Trainer.tiny("grpo", task=task, seed=seed, prompts_per_step=prompts_per_step, num_generations=G)
    return median_step_seconds(trainer, steps, warmup=1)


def group_size_study(*, task="countdown", G_values=(2, 4, 8, 16), n_prompts: int = 64, samples_per_prompt: int = 32,
                     timing_steps: int = 2, prompts_per_step: int = 16, seeds=(0,), progress: bool = False,
                     name: str = "group_size") -> GroupSizeResult:
    """Measure the rows described in the module docstring (``seeds[0]`` picks the prompts and samples)."""
    G_values = list(G_values)
    if not G_values or any(not isinstance(g, int) or g < 2 or samples_per_prompt % g for g in G_values):
        raise ValueError(f"G_values: expected ints >= 2 dividing samples_per_prompt={samples_per_prompt}, "
                         f"got {G_values!r}")
    seed = list(seeds)[0]
    correct = correctness_matrix(task, n_prompts=n_prompts, samples_per_prompt=samples_per_prompt, seed=seed)
    p = correct.double().mean(-1)                                        # (N,) pass rate per prompt
    M = samples_per_prompt
    rows = []
    for G in G_values:
        pred_rmse = math.sqrt(float((p * (1 - p)).mean()) * (M - G) / (G * (M - 1)))
        row = {"G": G, "zero_std_share": zero_std_share(correct, G),
               "predicted_zero_std_share": predicted_zero_std_share(p, G),
               "baseline_rmse": baseline_error(correct, G), "predicted_baseline_rmse": pred_rmse}
        if timing_steps:
            row["seconds_per_step"] = step_seconds(task, G=G, prompts_per_step=prompts_per_step,
                                                   steps=timing_steps, seed=seed)
            row["samples_per_step"] = G * prompts_per_step
        rows.append(row)
    config = {"name": name, "task": getattr(task, "name", task), "n_prompts": n_prompts, "samples_per_prompt": M,
              "prompts_per_step": prompts_per_step, "seed": seed, "mean_pass_rate": float(p.mean()),
              "torch_threads": torch.get_num_threads()}
    return GroupSizeResult(rows, config)
