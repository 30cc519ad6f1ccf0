"""Shipped result for notebook 06: entropy collapses with the clip on and mu = 1, where the clip never fires.

Arms (fixed before measuring), GRPO on Countdown, one optimizer step per batch (num_iterations = 1,
num_mini_batches = 1), lr 3e-4 without warm-up, 30 steps, seeds 0, 1, 2 (none dropped):
- ``clip 0.2``: GRPO's clip, eps_low = eps_high = 0.2;
- ``clip 0.05``: a four times tighter clip;
- ``thermostat``: the same clip plus an entropy control (Skywork-OR1's adaptive bonus: target 0.5,
  delta 0.005, coefficient at most 0.05).

    PYTHONPATH=. python scripts/entropy_clip.py          # about 20-30 minutes on 2 shared cores
    -> docs/results/entropy_clip.json.gz  (rlnb.studies.load_result("entropy_clip"))
"""

from __future__ import annotations

import argparse
import time

import torch

from rlnb.studies import run_study

ARMS = {
    "clip 0.2": {},
    "clip 0.05": {"eps_low": 0.05, "eps_high": 0.05},
    "thermostat": {"entropy_target": 0.5, "entropy_coef": 0.0, "entropy_coef_delta": 0.005, "entropy_coef_max": 0.05},
}
SETTING = dict(task="countdown", lr=3e-4, warmup_steps=0, num_iterations=1, num_mini_batches=1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--out", default="docs/results/entropy_clip.json.gz")
    args = p.parse_args()
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    result = run_study(ARMS, seeds=args.seeds, steps=args.steps, name="entropy_clip", progress=False, **SETTING)
    result.to_json(args.out, digits=5)
    for arm in result.arms:
        print(arm, "entropy start", result.value(arm, "start:entropy"), "final", result.value(arm, "final:entropy"),
              "clip max", result.value(arm, "max:clip_ratio/region_mean"))
    print(f"wrote {args.out} in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
