"""Measure what each lab scenario shows on the toy, the way the lab runs it: set up the symptom, train the
scenario's ``warm`` steps, fork, apply the fix in the fork only, and race both branches ``--steps`` more steps,
on each of ``--seeds``.

    nice -n 10 python scripts/measure_lab_scenarios.py [--steps 20 --seeds 0 1]

Writes docs/results/lab_scenarios.json: per scenario and seed, the watched metric and the reward at every step
of the race, in the untreated main run ("symptom") and in the fork with the fix ("fix"): same seed, same
prompts, same weights at the fork. ``rlnb.lab.scenarios.shown`` and ``helped`` judge them (rules fixed there);
the script prints their verdicts.
"""

from __future__ import annotations

import argparse
import json
import time

from rlnb import Trainer
from rlnb.lab import LabLoop, measure_kl
from rlnb.lab.scenarios import RESULTS, SCENARIOS, helped, shown, why_not


def race(setup: dict, fix: dict, warm: int, steps: int, P: int, G: int, seed: int) -> tuple[list, list]:
    """The histories of the main run and of the fork, from the fork step on."""
    t = Trainer.tiny("grpo", seed=seed, **{"prompts_per_step": P, "num_generations": G, **setup})
    measure_kl(t)  # KL to the start at every step, as in the lab
    loop = LabLoop(t)
    for _ in range(warm):
        loop.step()
    branch = loop.fork(**fix)
    for _ in range(steps):
        loop.step()
    loop.close()
    return t.history[warm:], branch.history[warm:]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--P", type=int, default=8)
    ap.add_argument("--G", type=int, default=8)
    ap.add_argument("--only", nargs="*", default=None, help="scenario names to re-measure (the others are kept)")
    args = ap.parse_args()
    out = json.loads(RESULTS.read_text()) if args.only and RESULTS.exists() else {}
    for name, s in SCENARIOS.items():
        if args.only and name not in args.only:
            continue
        t0 = time.time()
        runs = []
        for seed in args.seeds:
            main_h, fork_h = race(s.setup, s.fix, s.warm, args.steps, args.P, args.G, seed)
            keys = dict.fromkeys([s.metric, "reward"])
            runs.append({"seed": seed, "symptom": {k: [h[k] for h in main_h] for k in keys},
                         "fix": {k: [h[k] for h in fork_h] for k in keys}})
        out[name] = {"warm": s.warm, "steps": args.steps, "P": args.P, "G": args.G, "metric": s.metric,
                     "setup": s.setup, "fix_knobs": s.fix, "runs": runs}
        print(f"{name}: shown {shown(name, out[name])}, helped {helped(name, out[name])} "
              f"{why_not(name, out[name])} ({time.time() - t0:.0f} s)", flush=True)
    out = {n: out[n] for n in SCENARIOS if n in out}   # a dropped scenario's old numbers go
    RESULTS.write_text(json.dumps(out, indent=1, default=str))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
