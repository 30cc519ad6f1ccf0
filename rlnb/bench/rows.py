"""``python -m rlnb.bench rows``: a GRPO step with its rows as parallel parts (``rows="split"``, the default) and as
one call (``rows="whole"``), side by side.

On a CPU with two or more torch threads rlnb cuts the decode's step (``rlnb.models.split_decode``) and the update's
forward and backward (``rlnb.models.row_split``) into parts of consecutive rows, each on its own thread with one
intra-op thread (the decode's second part in a worker process where its matmuls are small:
``rlnb.models.decode_worker``), instead of cutting every operator between threads that wait for each other. Two trainers of the
embedded default at the vs-TRL benchmark's settings and seed, one per mode, step in turn (one warm-up each), so both
see the same machine; the table prints median seconds per step and stage and the ratio, and how far apart the two
runs' losses are (the same numbers to rounding at first; a sampled token that flips on a rounding difference makes
the runs part ways, as two seeds do).

    python -m rlnb.bench rows                 # 12 steps each, 2 threads
    python -m rlnb.bench rows --steps 4       # a quick look
"""

from __future__ import annotations

import argparse
import statistics
import time

MODES = ("whole", "split")


def measure(steps: int, threads: int) -> dict[str, list[dict]]:
    import torch

    from rlnb.bench.vs_trl import rlnb_trainer
    from rlnb.models import decode_worker

    torch.set_num_threads(threads)
    decode_worker.ready()                     # the split decode's second part in its process from the first step
    trainers = {}
    for mode in MODES:
        trainers[mode] = rlnb_trainer("fp32", 0)
        trainers[mode].set_forward_options(rows=mode)
        trainers[mode].step()                                             # warm-up: AdamW's state, the pool
    out: dict[str, list[dict]] = {m: [] for m in MODES}
    for _ in range(steps):
        for mode, trainer in trainers.items():
            t0 = time.perf_counter()
            m = trainer.step().metrics
            out[mode].append({"step": time.perf_counter() - t0, "sample": m["timing/sample_s"],
                              "update": m["timing/update_s"], "loss": m["loss"]})
    return out


def table(res: dict[str, list[dict]]) -> list[str]:
    med = {k: {f: statistics.median(r[f] for r in v) for f in ("step", "sample", "update")} for k, v in res.items()}
    lines = ["rows  | s/step | sample | update"]
    for mode in MODES:
        m = med[mode]
        lines.append(f"{mode:<5} | {m['step']:.3f}  | {m['sample']:.3f}  | {m['update']:.3f}")
    w, s = med["whole"], med["split"]
    lines.append(f"whole / split: step {w['step'] / s['step']:.2f}x, sample {w['sample'] / s['sample']:.2f}x, "
                 f"update {w['update'] / s['update']:.2f}x")
    first = abs(res["whole"][0]["loss"] - res["split"][0]["loss"])
    lines.append(f"|loss whole - loss split| at the first timed step: {first:.2e}")
    return lines


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m rlnb.bench rows", description=__doc__.split("\n\n")[0],
                                allow_abbrev=False)
    p.add_argument("--steps", type=int, default=12, help="timed steps per mode after one warm-up (default 12)")
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2; the split needs 2 or more)")
    args = p.parse_args(argv)
    for name in ("steps", "threads"):
        if getattr(args, name) < 1:
            p.error(f"--{name}: expected a positive int, got {getattr(args, name)}")
    return args


def main(argv=None) -> int:
    args = parse(argv)
    from rlnb.bench.vs_trl import cpu_model

    print(f"CPU: {cpu_model()}; threads {args.threads}; {args.steps} steps per mode after a warm-up, alternated; "
          "GRPO on the embedded default at the vs-TRL benchmark's settings, seed 0")
    print("\n".join(table(measure(args.steps, args.threads))))
    return 0
