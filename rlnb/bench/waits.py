"""``python -m rlnb.bench waits``: a GRPO step under passive and under spinning OpenMP waits, quiet and beside busy
processes, side by side.

rlnb makes OpenMP's threads wait passively (``rlnb/__init__``): a thread that finishes its share sleeps at once, and the
next parallel operator wakes it again. A spinning wait (``GOMP_SPINCOUNT``: that many turns of a busy loop before
sleeping, about 100 per microsecond) skips the wake-up when the next operator comes soon, and a step of the default
model is hundreds of operators in a row. But a spinning thread holds its core: beside another busy process the thread
it waits for may be the one without a core, and the step then waits for the scheduler at every operator.

Each cell is a fresh process (GNU OpenMP reads its settings once, when torch loads it) running ``--steps`` GRPO steps
of the embedded default at the vs-TRL benchmark's settings after one warm-up; ``--burners`` processes that spin in
plain Python stand in for a browser or a second run. Passive and spinning alternate (``--rounds`` each), so both
see the same machine; the table prints medians and the ratio. The policy never changes a number (the threads and
their work are the same), only how long the waits take.

    python -m rlnb.bench waits                          # burners 0, 1, 2; 8 steps; 2 rounds
    python -m rlnb.bench waits --burners 0 --steps 4    # a quick look on a quiet machine
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

SPIN = 10_000  # GOMP_SPINCOUNT of the spinning cell: about 0.1 ms before a waiting thread sleeps


def child(steps: int, threads: int) -> dict:
    """In a fresh process: one warm-up step, then ``steps`` timed steps; medians of step, sample and update."""
    import torch

    from rlnb.bench.vs_trl import rlnb_trainer

    torch.set_num_threads(threads)
    trainer = rlnb_trainer("fp32", 0)
    trainer.step()
    rows = []
    for _ in range(steps):
        t0 = time.perf_counter()
        m = trainer.step().metrics
        rows.append((time.perf_counter() - t0, m["timing/sample_s"], m["timing/update_s"]))
    return {k: statistics.median(r[i] for r in rows) for i, k in enumerate(("step", "sample", "update"))}


def spawn(spin: int | None, args) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "GOMP_SPINCOUNT"}
    env.update(OMP_WAIT_POLICY="PASSIVE", PYTHONPATH=os.pathsep.join(sys.path))
    if spin is not None:
        env["GOMP_SPINCOUNT"] = str(spin)                                # libgomp: overrides the policy's spin of 0
    cmd = [sys.executable, "-m", "rlnb.bench", "waits", "--child", "--steps", str(args.steps),
           "--threads", str(args.threads)]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    if res.returncode != 0 or not lines:
        raise RuntimeError(f"waits child failed (exit {res.returncode}): {(res.stderr or res.stdout)[-400:]}")
    return json.loads(lines[-1])


def burners(n: int) -> list[subprocess.Popen]:
    """``n`` processes that keep one core busy each until killed."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def measure(n_burners: int, args) -> dict[str, list[dict]]:
    procs = burners(n_burners)
    try:
        out: dict[str, list[dict]] = {"passive": [], "spin": []}
        for _ in range(args.rounds):
            out["passive"].append(spawn(None, args))
            out["spin"].append(spawn(args.spin, args))
        return out
    finally:
        for p in procs:
            p.kill()
            p.wait()


def line(n_burners: int, res: dict[str, list[dict]]) -> str:
    med = {k: {f: statistics.median(r[f] for r in v) for f in ("step", "sample", "update")} for k, v in res.items()}
    p, s = med["passive"], med["spin"]
    return (f"{n_burners:>7} | {p['step']:.3f} ({p['sample']:.3f} + {p['update']:.3f}) | "
            f"{s['step']:.3f} ({s['sample']:.3f} + {s['update']:.3f}) | {p['step'] / s['step']:.2f}")


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m rlnb.bench waits", description=__doc__.split("\n\n")[0],
                                allow_abbrev=False)
    p.add_argument("--burners", default="0,1,2", help="comma-separated counts of busy processes (default 0,1,2)")
    p.add_argument("--steps", type=int, default=8, help="timed steps per cell after one warm-up (default 8)")
    p.add_argument("--rounds", type=int, default=2, help="cells per policy and burner count, alternated (default 2)")
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    p.add_argument("--spin", type=int, default=SPIN, help=f"GOMP_SPINCOUNT of the spinning cells (default {SPIN})")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    for name in ("steps", "rounds", "threads", "spin"):
        if getattr(args, name) < 1:
            p.error(f"--{name}: expected a positive int, got {getattr(args, name)}")
    try:
        args.burners = [int(x) for x in args.burners.split(",")]
    except ValueError:
        p.error(f"--burners: expected comma-separated ints, got {args.burners!r}")
    if any(b < 0 for b in args.burners):
        p.error(f"--burners: expected counts >= 0, got {args.burners}")
    return args


def main(argv=None) -> int:
    args = parse(argv)
    if args.child:
        print(json.dumps(child(args.steps, args.threads)))
        return 0
    from rlnb.bench.vs_trl import cpu_model

    print(f"CPU: {cpu_model()}; threads {args.threads}; {args.steps} steps per cell after a warm-up, {args.rounds} "
          f"rounds alternated; passive: OMP_WAIT_POLICY=PASSIVE (rlnb's default); spin: GOMP_SPINCOUNT={args.spin}")
    print("burners | passive s/step (sample + update) | spin s/step (sample + update) | passive / spin")
    for n in args.burners:
        print(line(n, measure(n, args)), flush=True)
    return 0
