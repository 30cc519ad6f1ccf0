"""Measure what each lab scenario shows on the toy, the way the lab runs it: set up the symptom, train
``--warm`` steps, fork, apply the fix in the fork only, and race both branches ``--steps`` more steps.

    nice -n 15 python scripts/measure_lab_scenarios.py [--warm 5 --steps 20]

Writes docs/results/lab_scenarios.json: per scenario, the watched metric's mean over the first 3 and the
last 5 steps of the race, in the untreated main run ("symptom") and in the fork with the fix ("fix"): same
seed, same prompts, same weights at the fork.
"""

from __future__ import annotations

import argparse
import json
import time

from rlnb import Trainer
from rlnb.lab import LabLoop, measure_kl
from rlnb.lab.scenarios import RESULTS, SCENARIOS


def race(setup: dict, fix: dict, warm: int, steps: int, P: int, G: int) -> tuple[list, list]:
    """The histories of the main run and of the fork, from the fork step on."""
    t = Trainer.tiny("grpo", **{"prompts_per_step": P, "num_generations": G, **setup})
    measure_kl(t)  # KL to the start at every step, as in the lab
    loop = LabLoop(t)
    for _ in range(warm):
        loop.step()
    branch = loop.fork(**fix)
    for _ in range(steps):
        loop.step()
    loop.close()
    return t.history[warm:], branch.history[warm:]


def summary(history, metric) -> dict:
    vals = [h[metric] for h in history]
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    return {"start": mean(vals[:3]), "end": mean(vals[-5:]), "values": vals}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--warm", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--P", type=int, default=8)
    ap.add_argument("--G", type=int, default=8)
    args = ap.parse_args()
    out = {}
    for name, s in SCENARIOS.items():
        t0 = time.time()
        out[name] = {"warm": args.warm, "steps": args.steps, "P": args.P, "G": args.G, "metric": s.metric,
                     "setup": s.setup, "fix_knobs": s.fix}
        main, fork = race(s.setup, s.fix, args.warm, args.steps, args.P, args.G)
        out[name]["symptom"], out[name]["fix"] = summary(main, s.metric), summary(fork, s.metric)
        print(f"{name}: {s.metric} symptom {out[name]['symptom']['start']:.3f}->{out[name]['symptom']['end']:.3f}"
              f" fix {out[name]['fix']['start']:.3f}->{out[name]['fix']['end']:.3f} ({time.time() - t0:.0f} s)",
              flush=True)
    RESULTS.write_text(json.dumps(out, indent=1, default=str))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
