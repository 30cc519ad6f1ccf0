"""``rlnb bench loss`` / ``python -m rlnb.bench loss``: the token-level loss, rlnb against its peers.

Every variant gets identical inputs and the same objective (``variants.py``). In order:

1. fp64 gate. Each variant runs once (this also warms up ``torch.compile``); its log-prob, entropy,
   per-token loss and logits gradient on a sample of rows are compared with fp64. A variant that
   fails gets no speed or memory figure (``--keep-failed`` times it anyway, flagged).
2. Memory: peak *extra* bytes of one forward + backward, gradient counted, inputs not.
   CPU: a fresh process per variant, started with ``MALLOC_MMAP_THRESHOLD_=65536`` so that glibc serves
   every allocation above 64 KB with its own mmap and returns it on free (by default glibc raises that
   threshold as big blocks are freed and then keeps freed memory in its heap, which would hide later
   peaks). The child builds the inputs, runs one warm-up step, resets the kernel's RSS high-water mark
   (``echo 5 > /proc/self/clear_refs``), reads VmRSS as the baseline, runs one step and reports
   VmHWM - baseline. CUDA: ``torch.cuda.max_memory_allocated`` minus the allocation before the step.
3. Time. CPU: ``--rounds`` rounds, each runs every variant once in a rotated order; per round each
   time is divided by naive fp32's, and the table shows the median seconds and the median ratio
   (medians of per-round ratios cancel most of the noise of a shared machine). CUDA:
   ``triton.testing.do_bench`` (median ms), achieved GB/s against the minimum traffic of the loss
   (read the logits twice, write their gradient once) and the device's bandwidth.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time

import torch

from rlnb.bench import variants as VV
from rlnb.bench.variants import format_table, gate_all, select

CPU_DEFAULT = dict(B=2, T=512, V=151936)


def rss_mb(key: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"{key} not in /proc/self/status")


def child_memory(name: str, B: int, T: int, V: int, mode: str) -> dict:
    """In a fresh process: peak extra MB of one step of variant ``name`` (see the module docstring)."""
    torch.manual_seed(0)
    inp = VV.make_inputs(B, T, V)
    fn = VV.CPU_VARIANTS[name]
    out = VV.run_once(fn, inp, mode)                        # warm-up (compiles), then forget it
    del out
    VV.restore(fn, inp)
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")                                         # reset VmHWM to the current RSS
    base = rss_mb("VmRSS")
    out = VV.step(fn, inp, mode)  # noqa: F841 - the gradient in it must stay alive until we read the peak
    return {"extra_mb": rss_mb("VmHWM") - base, "grad_mb": inp.x.numel() * inp.x.element_size() / 2**20}


def _spawn_memory(name, args) -> dict:
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", PYTHONPATH=os.pathsep.join(sys.path))
    cmd = [sys.executable, "-m", "rlnb.bench", "loss", "--child", name, "--B", str(args.B), "--T", str(args.T),
           "--V", str(args.V), "--entropy", args.entropy]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    if res.returncode != 0 or not lines:
        return {"error": (res.stderr or res.stdout)[-300:]}
    return json.loads(lines[-1])


def peak_memory(name: str, *, B: int, T: int, V: int = 151936, entropy: str = "grad") -> dict:
    """Peak extra MB of one forward + backward of CPU variant ``name``, measured as the CPU tier does (a
    fresh process, see the module docstring): ``{"extra_mb": ..., "grad_mb": ...}`` (``grad_mb``: the
    bf16 logits gradient's size), or ``{"error": ...}`` if the child failed. Notebook 14 uses it.

    >>> peak_memory("naive", B=1, T=8)
    Traceback (most recent call last):
    ...
    KeyError: "name: unknown variant 'naive'; known: ['naive_fp32', 'torch_compile', 'trl', 'rlnb_chunked', 'rlnb_chunked_inplace']"
    """
    if name not in VV.CPU_VARIANTS:
        raise KeyError(f"name: unknown variant {name!r}; known: {list(VV.CPU_VARIANTS)}")
    if entropy not in VV.MODES:
        raise ValueError(f"entropy: expected one of {VV.MODES}, got {entropy!r}")
    for arg, v in (("B", B), ("T", T), ("V", V)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{arg}: expected a positive int, got {v!r}")
    return _spawn_memory(name, argparse.Namespace(B=B, T=T, V=V, entropy=entropy))


def cpu_tier(args) -> dict:
    torch.manual_seed(0)
    chosen, skipped = select(VV.CPU_VARIANTS, args.variants, "cpu")
    inp = VV.make_inputs(args.B, args.T, args.V)
    gates = gate_all(chosen, inp, args.entropy)
    timed = {n: f for n, f in chosen.items() if gates[n]["passed"] or args.keep_failed}
    mem = {n: _spawn_memory(n, args) for n in timed}
    times = {n: [] for n in timed}
    names = list(timed)
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            VV.restore(timed[name], inp)
            t0 = time.perf_counter()
            VV.step(timed[name], inp, args.entropy)
            times[name].append(time.perf_counter() - t0)
    base = times.get("naive_fp32")
    rows = {}
    for name in chosen:
        row = {"gate": gates[name]}
        if name in timed:
            row.update(mem[name], seconds=statistics.median(times[name]), times=times[name])
            if base:
                row["ratio_vs_naive"] = statistics.median(t / b for t, b in zip(times[name], base, strict=True))
        rows[name] = row
    return {"tier": "cpu", "B": args.B, "T": args.T, "V": args.V, "dtype": "bfloat16", "entropy": args.entropy,
            "rounds": args.rounds, "threads": torch.get_num_threads(), "variants": rows, "skipped": skipped}


def parse(argv):
    p = argparse.ArgumentParser(prog="rlnb bench loss", description=__doc__.split("\n")[0], allow_abbrev=False)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--entropy", choices=VV.MODES, default="grad", help="none / metric / grad")
    p.add_argument("--B", type=int, default=None, help="sequences (CPU default 2)")
    p.add_argument("--T", type=int, default=None, help="tokens per sequence (CPU default 512)")
    p.add_argument("--V", type=int, default=151936, help="vocabulary (Qwen2.5: 151936)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--variants", default=None, help="comma-separated subset")
    p.add_argument("--keep-failed", action="store_true", help="time variants that fail the fp64 gate")
    p.add_argument("--out", default=None, help="write the JSON here (default bench-loss-<device>.json)")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    if args.device == "cpu":
        args.B = args.B or CPU_DEFAULT["B"]
        args.T = args.T or CPU_DEFAULT["T"]
    if args.child:
        print(json.dumps(child_memory(args.child, args.B, args.T, args.V, args.entropy)))
        return 0
    if args.device == "cuda":
        from rlnb.bench.gpu import gpu_tier
        res = gpu_tier(args)
        text = res.pop("table")
    else:
        res = cpu_tier(args)
        text = format_table(res)
    res["command"] = "python -m rlnb.bench loss " + " ".join(argv if argv is not None else sys.argv[1:])
    res["torch"] = torch.__version__
    print(text)
    out = args.out or f"bench-loss-{args.device}.json"
    with open(out, "w") as f:
        json.dump(res, f, indent=1, default=str)
    print(f"wrote {out}")
    return 0
