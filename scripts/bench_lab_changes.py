"""Does the lab's step get slower the more knobs you turn? Seconds per paused ``lab.step()`` (step + redraw)
over the first steps, then after 100 knob changes, side by side in one run.

    python scripts/bench_lab_changes.py [--changes 100] [--steps 5]

Each change is applied at a step boundary and drawn as a dotted line in every panel (the latest
``MAX_MARKS`` of them); the redraw cost must not grow with the number of changes.
"""

from __future__ import annotations

import argparse
import statistics
import time

from rlnb import Trainer
from rlnb.viz import Lab


def timed_steps(lab: Lab, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        lab.step()
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--changes", type=int, default=100)
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()
    t = Trainer.tiny("grpo", seed=0, prompts_per_step=2, num_generations=4, max_new_tokens=12)
    lab = Lab(t, backend="static")
    try:
        first = timed_steps(lab, args.steps)
        for i in range(args.changes):  # a change, then the step that applies it
            lab.set("beta", 0.01 * (i % 5))
            lab.step()
        after = timed_steps(lab, args.steps)
    finally:
        lab.close()
    a, b = statistics.median(first), statistics.median(after)
    print(f"changes recorded: {len(lab.loop.changes)}")
    print(f"median s per lab.step(): first {args.steps} steps {a:.3f}, after {args.changes} changes {b:.3f}, "
          f"ratio {b / a:.2f}")


if __name__ == "__main__":
    main()
