"""Shipped result for notebook 09: does finer credit learn faster? VinePPO's Monte-Carlo per-token
advantages vs GRPO's uniform ones, at equal sampled tokens (the MC continuations count as sampled tokens).

Fixed before measuring (and not tuned afterwards): task ``add``, the embedded default model, seeds 0, 1, 2;
a budget of ``--tokens`` sampled tokens per run; greedy pass@1 on 100 held-out prompts at step 0 and after
every sixth of the budget. GRPO runs its toy recipe (P = 16 prompts x G = 8, lr 1e-4) without the learning-rate
warm-up (both arms: VinePPO's whole run is about as long as the 10-step warm-up). VinePPO is the same recipe
with ``advantage="vineppo"``, K = 4 continuations per prefix and a smaller batch (P = 4 x G = 4) so that
it gets more than a handful of steps: each of its steps samples about K * L / 2 times the tokens of its
completions in continuations. Every seed that ran is written; none is dropped.

    PYTHONPATH=. python scripts/credit_race.py              # about 20 minutes on a busy 2-core machine
    -> docs/results/credit_race.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

import rlnb

COMMON = dict(warmup_steps=0)  # VinePPO gets ~10 steps: a 10-step warm-up would be its whole run
ARMS = {"grpo": dict(COMMON),
        "vineppo": dict(COMMON, advantage="vineppo", mc_rollouts=4, prompts_per_step=4, num_generations=4)}
SEEDS = (0, 1, 2)
EVAL_N, CHECKPOINTS = 100, 6


def run_one(arm: str, seed: int, budget: int) -> dict:
    trainer = rlnb.Trainer.tiny("grpo", task="add", seed=seed, **ARMS[arm])
    tokens, t0, train_s = 0, time.perf_counter(), 0.0
    points = [{"tokens": 0, "step": 0, "train_s": 0.0, "greedy": trainer.evaluate(EVAL_N)["pass@1"]}]
    next_eval = budget / CHECKPOINTS
    while tokens < budget:
        t = time.perf_counter()
        mc_before = trainer.valuer.sampled_tokens if trainer.valuer is not None else 0
        rec = trainer.step()
        mc = (trainer.valuer.sampled_tokens if trainer.valuer is not None else 0) - mc_before
        tokens += int(rec.batch.mask.sum()) + mc
        train_s += time.perf_counter() - t
        if tokens >= next_eval or tokens >= budget:
            points.append({"tokens": tokens, "step": trainer.step_count, "train_s": round(train_s, 1),
                           "greedy": trainer.evaluate(EVAL_N)["pass@1"],
                           "reward": rec.metrics["reward"]})
            while next_eval <= tokens:
                next_eval += budget / CHECKPOINTS
    return {"arm": arm, "seed": seed, "points": points, "steps": trainer.step_count, "train_s": round(train_s, 1),
            "wall_s": round(time.perf_counter() - t0, 1)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=100_000, help="sampled tokens per run (completions + MC)")
    p.add_argument("--seeds", type=int, nargs="*", default=list(SEEDS))
    p.add_argument("--out", default="docs/results/credit_race.json")
    args = p.parse_args()
    torch.set_num_threads(1)
    runs, t0 = [], time.perf_counter()
    for seed in args.seeds:
        for arm in ARMS:
            runs.append(run_one(arm, seed, args.tokens))
            r = runs[-1]
            print(f"{arm} seed={seed}: {r['steps']} steps, greedy {r['points'][0]['greedy']:.2f} -> "
                  f"{r['points'][-1]['greedy']:.2f} ({r['train_s']:.0f} s training, "
                  f"{time.perf_counter() - t0:.0f} s so far)", flush=True)
    config = {"task": "add", "model": "embedded default", "base_recipe": "grpo", "arms": ARMS,
              "seeds": args.seeds, "tokens": args.tokens, "eval_n": EVAL_N, "checkpoints": CHECKPOINTS,
              "threads": 1, "script": "scripts/credit_race.py"}
    Path(args.out).write_text(json.dumps({"config": config, "runs": runs}, indent=1))
    print(f"wrote {args.out} in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
