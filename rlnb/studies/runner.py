"""``run_study``: train every arm on every seed (the same seeds for every arm) and keep what happened.

An *arm* is a dict of ``Recipe`` overrides (plus, optionally, ``"recipe"``: another base recipe). Each
(arm, seed) run is ``Trainer.tiny(recipe, task=task, seed=seed, **common, **arm)``, trained for
``steps`` steps (or, with ``match_samples``, until it has sampled ``steps * P * G`` completions, so
recipes that resample, like DAPO's dynamic sampling, spend the same sample budget), or until it has
sampled ``tokens`` tokens (Monte-Carlo continuations included: VinePPO pays for its credit). Held-out
evaluations run at step 0, every ``eval_every`` steps' worth of samples (or tokens), and at the end. The
result's format (``RunResult``, ``StudyResult``) is ``rlnb.studies.results``'.
"""

from __future__ import annotations

import copy
import os
import platform
import time

import torch

from rlnb.loop import Trainer
from rlnb.studies.probes import kl_to_reference
from rlnb.studies.results import RunResult, StudyResult


def _scalars(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if v is None or isinstance(v, (int, float))}


def _evaluate(trainer: Trainer, init_model, *, eval_n: int, eval_sampled_n: int, eval_k: int, **where) -> dict:
    ev = {"step": trainer.step_count, **where}
    if eval_n:
        g = trainer.evaluate(eval_n, greedy=True)
        ev.update({"greedy/pass@1": g["pass@1"], "greedy/mean_length": g["mean_length"]})
    if eval_sampled_n:
        s = trainer.evaluate(eval_sampled_n, greedy=False, k=eval_k)
        ev.update({f"sampled/{k}": v for k, v in s.items()})
    if init_model is not None:  # exact KL to the starting model on the last training batch (0 at step 0)
        ev["kl_to_init"] = kl_to_reference(trainer.model, init_model, trainer.records[-1].batch,
                                           temperature=trainer.recipe.temperature) if trainer.records else 0.0
    return ev


def _mc_tokens(trainer: Trainer) -> int:
    """Continuation tokens the valuer (VinePPO) has sampled so far: they count as sampled tokens."""
    return trainer.valuer.sampled_tokens if trainer.valuer is not None else 0


def run_one(arm: str, overrides: dict, *, task, seed: int, steps: int | None = None, tokens: int | None = None,
            base_recipe="grpo", eval_every: float = 0, eval_n: int = 0, eval_sampled_n: int = 0, eval_k: int = 8,
            kl_to_init: bool = False, match_samples: bool = False, on_step=None, **common) -> RunResult:
    """Train one arm on one seed; see ``run_study`` for the arguments."""
    over = {**common, **overrides}
    recipe = over.pop("recipe", base_recipe)
    trainer = Trainer.tiny(recipe, task=task, seed=seed, **over)
    per_step = trainer.recipe.prompts_per_step * trainer.recipe.num_generations
    init_model = copy.deepcopy(trainer.model).eval().requires_grad_(False) if kl_to_init else None
    evaluating = bool(eval_n or eval_sampled_n or kl_to_init)
    res, spent, next_eval = RunResult(arm, seed, []), {"samples": 0, "tokens": 0}, 0
    unit = "tokens" if tokens is not None else "samples"    # what the budget and eval_every count
    every = eval_every if tokens is not None else max(eval_every, 1) * per_step

    def do_eval():
        nonlocal next_eval
        t0 = time.perf_counter()
        res.evals.append(_evaluate(trainer, init_model, eval_n=eval_n, eval_sampled_n=eval_sampled_n, eval_k=eval_k,
                                   **spent, wall_s=round(res.wall_s, 4)))
        res.eval_s += time.perf_counter() - t0
        while next_eval <= spent[unit]:  # the next multiple of eval_every (steps' worth of samples, or tokens)
            next_eval += every or tokens

    def more() -> bool:
        if tokens is not None:
            return spent["tokens"] < tokens
        return spent["samples"] < steps * per_step if match_samples else trainer.step_count < steps

    if evaluating:
        do_eval()
    while more():
        t0, mc = time.perf_counter(), _mc_tokens(trainer)
        rec = trainer.step()
        res.wall_s += time.perf_counter() - t0
        spent["samples"] += int(rec.metrics.get("gen_rounds", 1)) * per_step
        spent["tokens"] += int(rec.batch.mask.sum()) + _mc_tokens(trainer) - mc
        groups = rec.batch.P  # groups in the update (dynamic sampling may bring fewer than P)
        signal = round(groups * (1 - rec.metrics["frac_reward_zero_std"]))
        res.history.append({**_scalars(rec.metrics), **spent, "wall_s": round(res.wall_s, 4),
                            "groups": groups, "groups_with_signal": signal})
        if on_step is not None:
            on_step(rec)
        if evaluating and eval_every and spent[unit] >= next_eval:
            do_eval()
    if evaluating and res.evals[-1][unit] < spent[unit]:  # always end with an evaluation
        do_eval()
    res.info["ended"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())  # a plan must predate its first run
    if hasattr(os, "getloadavg"):  # a shared machine slows every arm: wall times need it beside them
        res.info["load"] = round(os.getloadavg()[0], 2)
    return res


def run_study(arms: dict[str, dict], *, task, seeds, steps: int | None = None, tokens: int | None = None,
              base_recipe="grpo", eval_every: float = 0, eval_n: int = 0, eval_sampled_n: int = 0, eval_k: int = 8,
              kl_to_init: bool = False, match_samples: bool = False, window: int | None = None,
              progress: bool = True, name: str = "study", **common) -> StudyResult:
    """Run every arm on every seed and return a ``StudyResult``.

    ``arms``: name -> Recipe overrides (``"recipe"`` picks another base recipe for that arm).
    ``common``: overrides shared by all arms (``prompts_per_step``, ``num_generations``, ``lr`` ...).
    The budget of each run, one of: ``steps`` (optimizer steps, or with ``match_samples`` that many steps' worth
    of sampled completions) or ``tokens`` (sampled tokens, Monte-Carlo continuations included, so an estimator
    that samples more per step pays for it).
    ``eval_n``: held-out prompts for greedy pass@1; ``eval_sampled_n``: prompts for sampled pass@1 and
    pass@``eval_k`` (``eval_k`` samples each); ``eval_every``: evaluate every so many steps' worth of
    samples, or tokens with a token budget (0: only at the start and at the end). ``kl_to_init``: also measure
    the exact KL to the starting model at each evaluation (``probes.kl_to_reference``). ``window``: steps
    averaged by the summary's ``start``/``final`` (default: a tenth of ``steps``; 1 with a token budget).
    """
    if not isinstance(arms, dict) or not arms or not all(isinstance(v, dict) for v in arms.values()):
        raise ValueError(f"arms: expected a non-empty dict of name -> dict of recipe overrides, got {arms!r}")
    seeds = [seeds] if isinstance(seeds, int) else list(seeds)
    if not seeds or not all(isinstance(s, int) for s in seeds):
        raise ValueError(f"seeds: expected a non-empty list of ints, got {seeds!r}")
    if len(set(seeds)) != len(seeds):  # a repeated seed is the same run again: it would narrow the intervals
        raise ValueError(f"seeds: expected distinct seeds, got {seeds!r} (repeated: "
                         f"{sorted({s for s in seeds if seeds.count(s) > 1})})")
    _check_budget(steps, tokens, match_samples)
    from tqdm.auto import tqdm

    kw = dict(task=task, steps=steps, base_recipe=base_recipe, eval_every=eval_every, eval_n=eval_n,
              eval_sampled_n=eval_sampled_n, eval_k=eval_k, kl_to_init=kl_to_init, match_samples=match_samples)
    if tokens is not None:
        kw = {**{k: v for k, v in kw.items() if k != "steps"}, "tokens": tokens}
    config = {"name": name, **kw, "task": getattr(task, "name", task), "seeds": seeds, "arms": arms,
              "common": common, "window": window or max(1, (steps or 0) // 10), "torch_threads": torch.get_num_threads(),
              "machine": f"{platform.machine()}, {os.cpu_count()} cores", "date": time.strftime("%Y-%m-%d")}
    per_run = steps if steps is not None else 1  # the bar counts steps, or runs under a token budget
    bar = tqdm(total=len(arms) * len(seeds) * per_run, disable=not progress, desc=name)
    tick = (lambda r: bar.update(1)) if steps is not None else None
    runs = []
    try:
        for arm, overrides in arms.items():
            for seed in seeds:
                bar.set_postfix(arm=arm, seed=seed, refresh=True)
                runs.append(run_one(arm, overrides, seed=seed, on_step=tick, **kw, **common))
                bar.update(max(0, len(runs) * per_run - bar.n))  # a run that met its sample budget early is done
    finally:
        bar.close()
    return StudyResult(runs, config)


def _check_budget(steps, tokens, match_samples) -> None:
    if (steps is None) == (tokens is None):
        raise ValueError(f"steps, tokens: expected exactly one budget, got steps={steps!r}, tokens={tokens!r}")
    for name, value in (("steps", steps), ("tokens", tokens)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ValueError(f"{name}: expected a positive int, got {value!r}")
    if tokens is not None and match_samples:
        raise ValueError("match_samples: a token budget already counts what was sampled; drop match_samples")


__all__ = ["RunResult", "StudyResult", "run_one", "run_study"]  # the format is results.py's; named here too
