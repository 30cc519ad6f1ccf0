"""Measure what each lab scenario shows on the toy, with and without its fix.

    nice -n 15 python scripts/measure_lab_scenarios.py [--steps 20]

Writes docs/results/lab_scenarios.json: per scenario, the watched metric's mean over the first 3 and the
last 5 steps, as set up and with the fix (same seed, same prompts).
"""

from __future__ import annotations

import argparse
import copy
import json
import time

from rlnb import Trainer
from rlnb.models import load_default
from rlnb.viz.live.scenarios import RESULTS, SCENARIOS


def run(knobs: dict, steps: int, reference: bool, P: int, G: int) -> dict:
    model, tok = load_default()
    ref = copy.deepcopy(model).eval().requires_grad_(False) if reference else None
    t = Trainer(model, tok, "add", "grpo", ref_model=ref, **{"prompts_per_step": P, "num_generations": G, **knobs})
    t.run(steps, progress=False)
    return t.history


def summary(history, metric) -> dict:
    vals = [h[metric] for h in history]
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    return {"start": mean(vals[:3]), "end": mean(vals[-5:]), "values": vals}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--P", type=int, default=8)
    ap.add_argument("--G", type=int, default=8)
    args = ap.parse_args()
    out = {}
    for name, s in SCENARIOS.items():
        t0 = time.time()
        arms = {"symptom": s.setup, "fix": {**s.setup, **s.fix}}
        out[name] = {"steps": args.steps, "P": args.P, "G": args.G, "metric": s.metric, "setup": s.setup,
                     "fix_knobs": s.fix}
        for arm, knobs in arms.items():
            out[name][arm] = summary(run(knobs, args.steps, s.reference, args.P, args.G), s.metric)
        print(f"{name}: {s.metric} symptom {out[name]['symptom']['start']:.3f}->{out[name]['symptom']['end']:.3f}"
              f" fix {out[name]['fix']['start']:.3f}->{out[name]['fix']['end']:.3f} ({time.time() - t0:.0f} s)",
              flush=True)
    RESULTS.write_text(json.dumps(out, indent=1, default=str))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
