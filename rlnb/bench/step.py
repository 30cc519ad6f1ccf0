"""``python -m rlnb.bench step``: peak memory and time of one GRPO training step, reference vs fused LM head.

Both paths run the same step (Sampler, Rewarder, Advantager, Updater) of a random Qwen2-shaped model with
the embedded default tokenizer, in a fresh process each (same seed, same inputs). Memory on CPU: the child
is started with ``MALLOC_MMAP_THRESHOLD_=65536`` (glibc then returns every big block to the kernel on
free, so later peaks are not hidden in its heap), runs one warm-up step (AdamW's state is allocated there),
resets the kernel's RSS high-water mark (``echo 5 > /proc/self/clear_refs``), reads VmRSS, runs one timed
step and reports VmHWM minus that baseline: the process's resident high-water, which sees torch's
allocations (tracemalloc does not). On CUDA: ``torch.cuda.max_memory_allocated`` minus the allocation
before the step. The table compares each increase with the full fp32 logits of the completions,
B x T x V x 4 bytes (B = prompts x generations, T = max_new_tokens).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import torch

from rlnb.bench.loss import rss_mb  # one reader of /proc/self/status for both benchmarks

PRESETS = {  # name -> Qwen2 shape and step (cpu: the shape; 0.5b: Qwen2.5-0.5B's shape, bf16, GPU)
    "cpu": dict(hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128, max_new_tokens=32, dtype="fp32"),
    "0.5b": dict(hidden=896, layers=24, heads=14, kv_heads=2, intermediate=4864, max_new_tokens=512, dtype="bf16"),
}
PATHS = ("reference", "fused")


def build_trainer(args):
    """A random Qwen2-shaped model with vocabulary ``args.vocab`` and the default tokenizer, in a GRPO Trainer."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    import rlnb
    from rlnb.models import load_default

    _, tokenizer = load_default()
    p = PRESETS[args.preset]
    cfg = Qwen2Config(vocab_size=args.vocab, hidden_size=p["hidden"], num_hidden_layers=p["layers"],
                      num_attention_heads=p["heads"], num_key_value_heads=p["kv_heads"],
                      intermediate_size=p["intermediate"], max_position_embeddings=p["max_new_tokens"] + 256,
                      bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                      pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False)
    torch.manual_seed(0)
    dtype = torch.bfloat16 if p["dtype"] == "bf16" else torch.float32
    model = Qwen2ForCausalLM(cfg).to(device=args.device, dtype=dtype)
    return rlnb.Trainer(model, tokenizer, "add", "grpo", seed=0, prompts_per_step=args.prompts,
                        num_generations=args.generations, max_new_tokens=p["max_new_tokens"])


def child(args) -> dict:
    """In a fresh process: one warm-up step, then the peak increase and the time of one step on ``args.child``."""
    torch.set_num_threads(args.threads)
    trainer = build_trainer(args)
    trainer.set_forward_options(lm_head=args.child)          # the trainer's own setting: its steps take it
    cuda = args.device.startswith("cuda")
    trainer.step()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")                                 # reset VmHWM to the current RSS
        base = rss_mb("VmRSS")
    t0 = time.perf_counter()
    trainer.step()
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    peak = (torch.cuda.max_memory_allocated() - base) / 2**20 if cuda else rss_mb("VmHWM") - base
    h = trainer.history[-1]
    return {"peak_mb": peak, "seconds": seconds, "loss": h["loss"], "entropy": h["entropy"]}


def spawn(path: str, args) -> dict:
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", PYTHONPATH=os.pathsep.join(sys.path))
    cmd = [sys.executable, "-m", "rlnb.bench", "step", "--child", path, "--preset", args.preset,
           "--vocab", str(args.vocab), "--prompts", str(args.prompts), "--generations", str(args.generations),
           "--device", args.device, "--threads", str(args.threads)]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    if res.returncode != 0 or not lines:
        return {"error": (res.stderr or res.stdout)[-400:]}
    return json.loads(lines[-1])


def format_table(res: dict, args) -> str:
    T = PRESETS[args.preset]["max_new_tokens"]
    logits_mb = args.prompts * args.generations * T * args.vocab * 4 / 2**20
    lines = [f"one GRPO step, {args.preset} preset: Qwen2-shaped, V={args.vocab}, {args.prompts} prompts x "
             f"{args.generations} completions, max_new_tokens {T}, device {args.device}",
             f"full fp32 completion logits: {logits_mb:.0f} MB",
             f"{'path':<10} {'peak increase MB':>17} {'x logits':>9} {'seconds':>8} {'loss':>10}"]
    for path, r in res.items():
        if "error" in r:
            lines.append(f"{path:<10} failed: {r['error']}")
            continue
        lines.append(f"{path:<10} {r['peak_mb']:>17.0f} {r['peak_mb'] / logits_mb:>9.3f} {r['seconds']:>8.1f} "
                     f"{r['loss']:>10.5f}")
    ok = {p: r for p, r in res.items() if "error" not in r}
    if len(ok) == 2:
        ref, fused = ok["reference"], ok["fused"]
        lines.append(f"fused / reference: peak {fused['peak_mb'] / max(ref['peak_mb'], 1e-9):.3f}x, "
                     f"time {fused['seconds'] / ref['seconds']:.2f}x")
    return "\n".join(lines)


def parse(argv):
    p = argparse.ArgumentParser(prog="rlnb bench step", description=__doc__.split("\n")[0], allow_abbrev=False)
    p.add_argument("--preset", choices=sorted(PRESETS), default="cpu")
    p.add_argument("--vocab", type=int, default=151936, help="V (Qwen2.5's vocabulary by default)")
    p.add_argument("--prompts", type=int, default=16)
    p.add_argument("--generations", type=int, default=8)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, default=2, help="torch threads in each child (CPU)")
    p.add_argument("--paths", default=",".join(PATHS), help="comma-separated subset of " + ",".join(PATHS))
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    for name in ("vocab", "prompts", "generations", "threads"):
        if getattr(args, name) < 1:
            p.error(f"--{name}: expected a positive int, got {getattr(args, name)}")
    paths = args.paths.split(",")
    bad = [x for x in paths if x not in PATHS]
    if bad:
        p.error(f"--paths: unknown {bad}; known: {list(PATHS)}")
    args.paths = paths
    return args


def main(argv=None) -> int:
    args = parse(argv)
    if args.child:
        print(json.dumps(child(args)))
        return 0
    res = {path: spawn(path, args) for path in args.paths}
    print(format_table(res, args))
    return 0 if all("error" not in r for r in res.values()) else 1
