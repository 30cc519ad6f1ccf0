"""Shipped result for notebook 07: GRPO on the broken verifier ``add_loophole``, beta 0 vs 0.5 vs 2.

Seeds 0, 1, 2 and the arms were fixed before measuring; every seed that ran is written, none is dropped.
Each run logs per step: the training reward (what the broken verifier pays), the true accuracy (the
honest ``correct`` part), the loophole share (completions paid only through the hole) and the k3 KL.

    PYTHONPATH=. python scripts/reward_hacking.py            # about 6 minutes on 2 cores
    -> docs/results/reward_hacking.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

import rlnb

KEYS = {"reward": "reward", "accuracy": "accuracy", "loophole": "rewards/loophole/mean", "kl": "kl",
        "entropy": "entropy"}


def run_one(beta: float, seed: int, steps: int) -> dict:
    trainer = rlnb.Trainer.tiny("grpo", task="add_loophole", seed=seed, beta=beta)
    trainer.run(steps, progress=False)
    return {"beta": beta, "seed": seed, **{k: [h[m] for h in trainer.history] for k, m in KEYS.items()}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--out", default="docs/results/reward_hacking.json")
    args = p.parse_args()
    torch.set_num_threads(1)
    betas, seeds, runs, t0 = (0.0, 0.5, 2.0), (0, 1, 2), [], time.perf_counter()
    for beta in betas:
        for seed in seeds:
            runs.append(run_one(beta, seed, args.steps))
            r = runs[-1]
            print(f"beta={beta} seed={seed}: final loophole {r['loophole'][-1]:.3f}, max {max(r['loophole']):.3f}, "
                  f"accuracy {r['accuracy'][-1]:.3f} ({time.perf_counter() - t0:.0f} s)", flush=True)
    config = {"recipe": "grpo", "task": "add_loophole", "steps": args.steps, "betas": list(betas),
              "seeds": list(seeds), "P": 16, "G": 8, "lr": 1e-4, "threads": 1}
    Path(args.out).write_text(json.dumps({"config": config, "runs": runs}, indent=1))
    print(f"wrote {args.out} in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
