"""How long the main thread (the kernel's, in a notebook) waits while the lab trains in the background.

    nice -n 15 python scripts/bench_lab_responsiveness.py [--seconds 10]

Ticks ``time.sleep(0.01)`` in the main thread, first idle and then while ``lab.play()`` trains, and prints
the median and worst gap between ticks side by side (a gap is what a widget message could wait).
"""

from __future__ import annotations

import argparse
import statistics
import time

from rlnb import Trainer
from rlnb.viz import Lab


def gaps(seconds: float) -> list[float]:
    out, t0 = [], time.perf_counter()
    last = t0
    while last - t0 < seconds:
        time.sleep(0.01)
        now = time.perf_counter()
        out.append(now - last)
        last = now
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()
    lab = Lab(Trainer.tiny("grpo"), backend="static")
    idle = gaps(args.seconds)
    lab.play()
    busy = gaps(args.seconds)
    lab.pause()
    steps = lab.trainer.step_count
    lab.close()
    for name, g in (("idle", idle), ("playing", busy)):
        print(f"{name:>8}: median gap {statistics.median(g) * 1e3:.1f} ms, worst {max(g) * 1e3:.1f} ms, "
              f"{len(g)} ticks")
    print(f"steps trained while playing: {steps} in {args.seconds:.0f} s")


if __name__ == "__main__":
    main()
