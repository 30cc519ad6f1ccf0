"""Shipped result for notebook 04: PPO with a critic vs GRPO at equal samples on the default model.

Both recipes draw the same prompts per step (P) and completions per prompt (G) for the same number of steps,
so every run sees the same number of samples; each recipe keeps its own other settings (``recipes.get``).
Seeds 0, 1, 2 and the budget were fixed before measuring; every run that finished is written, none is dropped.
Held-out pass@1 (greedy, ``Trainer.evaluate``) is measured at step 0 and every ``--eval-every`` steps; wall
time is the training time of each run (evaluation excluded), with the machine's load average beside it
because a shared machine slows both recipes.

    PYTHONPATH=. python scripts/ppo_vs_grpo.py                 # tens of minutes on a busy 2-core machine
    -> docs/results/ppo_vs_grpo.json (rewritten after every run, so a stopped script keeps what finished)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import torch

import rlnb

RECIPES = ("ppo", "grpo")
SEEDS = (0, 1, 2)


def run_one(recipe: str, seed: int, *, steps: int, eval_every: int, n_eval: int, P: int, G: int) -> dict:
    trainer = rlnb.Trainer.tiny(recipe, seed=seed, prompts_per_step=P, num_generations=G)
    evals, train_s = [(0, trainer.evaluate(n_eval)["pass@1"])], 0.0
    while trainer.step_count < steps:
        t0 = time.perf_counter()
        trainer.run(min(eval_every, steps - trainer.step_count), progress=False)
        train_s += time.perf_counter() - t0
        evals.append((trainer.step_count, trainer.evaluate(n_eval)["pass@1"]))
    h = trainer.history
    return {"recipe": recipe, "seed": seed, "eval_steps": [s for s, _ in evals], "pass@1": [p for _, p in evals],
            "reward": [x["reward"] for x in h], "train_s": train_s,
            "sample_s": sum(x["timing/sample_s"] for x in h), "update_s": sum(x["timing/update_s"] for x in h),
            "samples": steps * P * G, "load": os.getloadavg()[0]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--eval-every", type=int, default=10)
    p.add_argument("--n-eval", type=int, default=100)
    p.add_argument("--P", type=int, default=8)
    p.add_argument("--G", type=int, default=8)
    p.add_argument("--out", default="docs/results/ppo_vs_grpo.json")
    args = p.parse_args()
    torch.set_num_threads(1)  # on a shared CPU one thread is faster and steadier than two (toy_findings)
    config = {"recipes": list(RECIPES), "seeds": list(SEEDS), "task": "add", "steps": args.steps, "P": args.P,
              "G": args.G, "eval_every": args.eval_every, "n_eval": args.n_eval, "threads": 1,
              "script": "scripts/ppo_vs_grpo.py", "machine": f"{platform.machine()}, {os.cpu_count()} cores",
              "date": time.strftime("%Y-%m-%d")}
    runs, t0 = [], time.perf_counter()
    for seed in SEEDS:            # seed-major, so a stopped script holds both recipes for the seeds it finished
        for recipe in RECIPES:
            r = run_one(recipe, seed, steps=args.steps, eval_every=args.eval_every, n_eval=args.n_eval,
                        P=args.P, G=args.G)
            runs.append(r)
            Path(args.out).write_text(json.dumps({"config": config, "runs": runs}, indent=1))
            print(f"{recipe} seed={seed}: pass@1 {r['pass@1']}, train {r['train_s']:.0f} s (load {r['load']:.1f}); "
                  f"{time.perf_counter() - t0:.0f} s so far", flush=True)
    print(f"wrote {args.out} in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
