"""rlnb's GRPO step against TRL's ``GRPOTrainer`` at the same settings, interleaved in one process.

    python scripts/bench_vs_trl.py                       # 150 steps each, CPU, 2 threads
    python scripts/bench_vs_trl.py --steps 6 --eval 50   # a quick look
    python scripts/bench_vs_trl.py --precision bf16      # mixed precision on both sides

``--precision bf16``: both sides in mixed precision (fp32 weights, gradients and AdamW state; the forward under bf16
autocast): rlnb through its ``autocast="bf16"`` model option (``rlnb.models.precision``), TRL through ``bf16=True``,
on a CPU accelerate's ``torch.autocast`` around the model's forward (the run prints which of TRL's forwards it saw
under autocast). rlnb's token log-softmax and loss stay fp32. Fair: the same precision on both sides.

Both sides start from the embedded default model, see the same prompts in the same order (TRL reads the
pool in the order rlnb draws it), score with the same verifier and take one optimizer step per batch of
P prompts x G completions. TRL's training loop drives: a callback times each TRL step (``on_step_begin``
to ``on_step_end``) and then runs and times one rlnb step, so the two alternate and share whatever load
the machine has at that moment; the ratio of each pair (TRL s / rlnb s) is the number to read.

Utilisation: the model FLOPs a step needs (one sampling pass over prompt and completion, one training
forward and backward; a recomputed forward counts as waste) divided by its seconds, over what a plain matmul
of the training forward's MLP shape at the run's precision (fp32 or bf16) reaches on the same cores in the run.
The FLOPs are counted from the batch's tokens, the same count for both sides: where rlnb computes less (each
prompt once; no backward for rows whose gradient is exactly zero, ``rlnb.stages.live_rows``) the run prints how
much less, and the count stays.

Per stage, the measured median seconds are printed next to the seconds the stage's FLOPs take at that matmul
rate (generation one forward over prompt and completion tokens, the training forward one, backward + optimizer
two), so the gap to the limit is visible stage by stage. ``--profile PATH`` then writes torch.profiler's table
of a few rlnb updates (forward, loss, backward, clipping, optimizer; ``rlnb.bench.update_profile``) to PATH.
The CPU's model is printed first: the same step is overhead-bound on one machine and not on another.

Padding efficiency: the share of the positions the training forward computes that hold real tokens. rlnb runs
each distinct prompt once and the completions in buckets of similar length (``rlnb.models.shared_prompt``);
TRL pads every row to the batch's longest prompt and longest completion. The positions each side computes are
printed too, next to the tokens the batch holds (G rows share each prompt, so rlnb computes fewer positions
than there are tokens).

The same as ``python -m rlnb.bench trl`` (``scripts/bench_vs_trl.py`` is its entry point, the name the docs give).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings

import torch

import rlnb
from rlnb.bench.arith import arithmetic_line, cpu_model, forward_flops, matmul_flops_per_s, step_flops
from rlnb.core import forward_options, heap
from rlnb.export import to_trl
from rlnb.models import DEFAULT_DIR, decode_worker, split_decode
from rlnb.models.precision import enable_autocast
from rlnb.models.shared_prompt import plan
from rlnb.models.threads import decode_threads
from rlnb.run.evaluate import evaluate
from rlnb.stages import live_rows
from rlnb.stages import sample as sample_mod
from rlnb.stages.update import loss_mask


class Stages:
    """Seconds per named stage, for the step in progress; ``wrap`` times a method or function."""

    def __init__(self):
        self.now: dict[str, float] = {}
        self.steps: list[dict[str, float]] = []

    def wrap(self, owner, attr: str, key: str):
        fn = getattr(owner, attr)

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.now[key] = self.now.get(key, 0.0) + time.perf_counter() - t0

        setattr(owner, attr, timed)

    def close(self, total: float, **more) -> None:
        self.steps.append({**self.now, **more, "total": total})
        self.now = {}




PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16}  # --precision -> the dtype the matmuls run in


def rlnb_trainer(precision: str, seed: int) -> rlnb.Trainer:
    """rlnb's side: the embedded default by path (without ``autocast`` the same trainer as ``Trainer.tiny``),
    in mixed precision for bf16."""
    return rlnb.Trainer.from_pretrained(DEFAULT_DIR, "add", "grpo", seed=seed, device="cpu",
                                        autocast=None if precision == "fp32" else precision)


def rlnb_threads(trainer, rows: int) -> str:
    """How rlnb's step uses the threads: as row parts of one thread each, or one call (its decode's thread rule)."""
    cpu = torch.device("cpu")
    n = split_decode.parts(rows, cpu, trainer.forward_options.rows)
    if n > 1:
        return (f"decode and update as {n} row parts of 1 thread each (ForwardOptions rows="
                f"{trainer.forward_options.rows!r}: rlnb.models.row_split, split_decode)")
    return f"its decode {decode_threads(trainer.model, rows, cpu)} (rlnb.models.threads: one where the matmuls are small)"


def count_worker_use() -> list[bool]:
    """A list that fills with whether the decode worker played a part (``rlnb.models.decode_worker``), per decode."""
    uses, real = [], decode_worker.start

    def start(*args, **kwargs):
        remote = real(*args, **kwargs)
        uses.append(remote is not None)
        return remote

    decode_worker.start = start
    return uses


def autocast_probe(model) -> set:
    """Watch ``model``'s first decoder layer: the returned set fills with (grad enabled, autocast enabled) per call,
    so the benchmark can say whether generation (no grad) and the training forward (grad) ran under autocast."""
    seen = set()
    layer = model.get_decoder().layers[0]
    layer.register_forward_pre_hook(lambda *a: seen.add((torch.is_grad_enabled(), torch.is_autocast_enabled("cpu"))))
    return seen


def build_trl(trainer: rlnb.Trainer, args, on_step):
    """A TRL GRPOTrainer on its own copy of the default model, reading rlnb's prompts in rlnb's order."""
    from transformers import TrainerCallback

    P = trainer.recipe.prompts_per_step
    order = trainer.prompts.perm(0)[: (args.steps + args.warmup) * P].tolist()
    exp = to_trl(trainer.recipe, trl_args=dict(gradient_checkpointing=False, use_cpu=True, shuffle_dataset=False,
                                               max_steps=args.steps + args.warmup, disable_tqdm=True,
                                               logging_steps=10_000, dataloader_num_workers=0,
                                               bf16=args.precision == "bf16"),  # on a CPU: accelerate's autocast
                 output_dir="/tmp/rlnb-bench-trl", seed=args.seed)

    class Interleave(TrainerCallback):
        def on_step_begin(self, *a, **k):
            self.t0 = time.perf_counter()

        def on_step_end(self, *a, **k):
            on_step(time.perf_counter() - self.t0)

    model, tok = rlnb.load_default()                                      # fp32 weights, as rlnb's
    return exp.trainer(model, tok, train_dataset=trainer.pool.select(order), callbacks=[Interleave()])


def summary(name: str, steps: list[dict], keys: list[str]) -> str:
    med = {k: statistics.median(s.get(k, 0.0) for s in steps) for k in keys + ["total"]}
    parts = "  ".join(f"{k} {med[k]:.3f}" for k in keys)
    return f"{name:5s} s/step median {med['total']:.3f}   per stage (medians): {parts}"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=150, help="timed steps per side (default 150)")
    p.add_argument("--warmup", type=int, default=1, help="untimed first steps per side")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--eval", type=int, default=200, help="held-out prompts for greedy pass@1 (0: skip)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--precision", choices=sorted(PRECISIONS), default="fp32", help="both sides: fp32, or bf16 mixed "
                   "precision (fp32 weights, forward under bf16 autocast)")
    p.add_argument("--profile", metavar="PATH", help="after the run, write torch.profiler's table of a few rlnb "
                   "updates (forward, loss, backward, optimizer) to PATH (e.g. docs/bench_vs_trl_profile.txt)")
    args = p.parse_args(argv)
    before = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        run(args)
    finally:
        torch.set_num_threads(before)                                    # a caller's setting outlives the benchmark


def run(args) -> None:
    """The benchmark with parsed ``args`` (``main``'s), on the thread count it set."""
    warnings.filterwarnings("ignore")
    ours = rlnb_trainer(args.precision, args.seed)
    dtype = PRECISIONS[args.precision]
    cfg = ours.model.config
    A, B = Stages(), Stages()                                             # A: TRL, B: rlnb
    flops, fwd = {"trl": [], "rlnb": [], "rlnb_ran": []}, {"trl": [], "rlnb": []}       # per step: the step's, one forward's
    real_share = {"trl": [], "rlnb": []}                                  # padding efficiency per step
    positions = {"trl": [], "rlnb": [], "tokens": [], "backward_rows": []}  # per step: training-forward positions
    shapes, mm = {}, []                                                   # mm: matmul FLOP/s between steps

    def rlnb_step(trl_seconds: float) -> None:
        A.close(trl_seconds)
        t0 = time.perf_counter()
        rec = ours.step()
        dt = time.perf_counter() - t0
        b = rec.batch
        pt, ct = float(b.prompt_mask.sum()), float(b.mask.sum())
        shapes.update(rows=b.B, prompt_tokens=pt, M=int(b.B * (b.prompt_ids.shape[1] + b.completion_ids.shape[1])))
        flops["rlnb"].append(step_flops(cfg, pt, ct, b.B))
        flops["trl"].append(step_flops(cfg, pt, A.steps[-1].get("completion_tokens", ct), b.B))
        fwd["rlnb"].append(forward_flops(cfg, pt, ct, b.B))
        fwd["trl"].append(forward_flops(cfg, pt, A.steps[-1].get("completion_tokens", ct), b.B))
        ours_plan = plan(b.prompt_ids, b.prompt_mask, b.mask)
        real_share["rlnb"].append(ours_plan["real"] / ours_plan["computed"])
        trl_ct, trl_T = A.steps[-1].get("completion_tokens", ct), A.steps[-1].get("completion_max", b.mask.shape[1])
        real_share["trl"].append((pt + trl_ct) / (b.B * (b.prompt_ids.shape[1] + trl_T)))
        positions["trl"].append(b.B * (b.prompt_ids.shape[1] + trl_T))
        positions["rlnb"].append(ours_plan["computed"])
        positions["tokens"].append(pt + ct)
        with forward_options.using(ours.forward_options):                 # rows whose backward ran (live_rows)
            alive = live_rows.live(ours.updater, b, loss_mask(b))
        positions["backward_rows"].append(b.B if alive is None else int(alive.sum()))
        # what rlnb ran, about: sampling and the training forward over the positions it computes, the backward
        # (two forwards' worth) over its live rows' share of them
        ran = forward_flops(cfg, ours_plan["computed"], 0.0, b.B)
        flops["rlnb_ran"].append(ran * (2 + 2 * positions["backward_rows"][-1] / b.B))
        m = rec.metrics
        mm.append(matmul_flops_per_s(max(shapes["M"], 256), cfg.hidden_size, cfg.intermediate_size, reps=5,
                                     dtype=dtype))
        B.close(dt, sample=m["timing/sample_s"], reward=m["timing/reward_s"], advantage=m["timing/advantage_s"],
                update=m["timing/update_s"])

    trl = build_trl(ours, args, rlnb_step)
    worker_ready = decode_worker.ready()      # started before the first step, so no timed decode waits for it
    worker_use = count_worker_use()
    trl_autocast = autocast_probe(trl.model)

    def count_tokens(inputs, prompts, completions, completion_ids_list):
        A.now["completion_tokens"] = float(sum(len(c) for c in completion_ids_list))
        A.now["completion_max"] = float(max(len(c) for c in completion_ids_list))

    A.wrap(trl, "_generate", "generate")
    A.wrap(trl, "_calculate_rewards", "reward")
    A.wrap(trl, "_generate_and_score_completions", "rollout")
    A.wrap(trl, "compute_loss", "loss_forward")
    calc = trl._calculate_rewards
    trl._calculate_rewards = lambda *a, **k: (count_tokens(*a, **k), calc(*a, **k))[1]
    B.wrap(sample_mod, "sample", "generate")
    B.wrap(ours.updater, "_policy_parts", "update_forward")  # the forward inside the loss (split or one call)

    t_run = time.perf_counter()
    trl.train()
    t_run = time.perf_counter() - t_run

    w = args.warmup
    ta, tb = A.steps[w:], B.steps[w:]
    for s in ta:  # what the wrapped stages leave: TRL's advantages and bookkeeping, and backward + optimizer
        s["rollout_other"] = s.get("rollout", 0) - s.get("generate", 0) - s.get("reward", 0)
        s["backward_optim"] = s["total"] - s.get("rollout", 0) - s.get("loss_forward", 0)
    for s in tb:
        s["sample_other"] = s["sample"] - s.get("generate", 0)
        s["update_other"] = s["update"] - s.get("update_forward", 0)
    ratios = [a["total"] / b["total"] for a, b in zip(ta, tb)]
    mm_q = statistics.quantiles(mm[w:], n=4) if len(mm) > w + 1 else mm * 3
    mm = statistics.median(mm[w:])
    util = {k: statistics.median(f / s["total"] for f, s in zip(flops[k][w:], st)) / mm
            for k, st in (("trl", ta), ("rlnb", tb))}
    print(f"CPU: {cpu_model()}; torch {torch.__version__}")
    print(f"settings: GRPO, P={ours.recipe.prompts_per_step} x G={ours.recipe.num_generations}, "
          f"max_new_tokens={ours.recipe.max_new_tokens}, one update per batch, CPU threads={args.threads}, "
          f"precision {args.precision} (both sides), "
          f"{len(ta)} timed steps each (+{w} warm-up), interleaved; wall {t_run:.0f} s")
    rows = ours.recipe.prompts_per_step * ours.recipe.num_generations
    print(f"threads: TRL {args.threads}; rlnb {args.threads}, {rlnb_threads(ours, rows)}; OpenMP waits: OMP_WAIT_POLICY="
          f"{os.environ.get('OMP_WAIT_POLICY')}, GOMP_SPINCOUNT={os.environ.get('GOMP_SPINCOUNT')} (both sides)")
    print(f"rlnb's decode worker process (rlnb.models.decode_worker): {'ready' if worker_ready else 'not started'}; "
          f"it played the second row part in {sum(worker_use)} of {len(worker_use)} decodes")
    print(f"glibc malloc keeps freed memory (rlnb.core.heap; one process, both sides): {heap.kept()}")
    print(summary("TRL", ta, ["generate", "reward", "rollout_other", "loss_forward", "backward_optim"]))
    print(summary("rlnb", tb, ["generate", "sample_other", "reward", "advantage", "update_forward", "update_other"]))
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    print(f"paired ratio TRL s/step / rlnb s/step: median {statistics.median(ratios):.2f} "
          f"(quartiles {q[0]:.2f}-{q[-1]:.2f}); ratio of medians "
          f"{statistics.median(a['total'] for a in ta) / statistics.median(b['total'] for b in tb):.2f}")
    print(f"TRL forwards under autocast: generation {(False, True) in trl_autocast}, training "
          f"{(True, True) in trl_autocast}; under fp32: generation {(False, False) in trl_autocast}, training "
          f"{(True, False) in trl_autocast}")
    print(f"{args.precision} matmul ({shapes.get('M', 4096)}x{cfg.hidden_size} @ {cfg.hidden_size}x{cfg.intermediate_size}): "
          f"median {mm / 1e9:.1f} GFLOP/s over the run (quartiles {mm_q[0] / 1e9:.1f}-{mm_q[-1] / 1e9:.1f}); "
          f"utilisation TRL {util['trl']:.2f}, rlnb {util['rlnb']:.2f}")
    print("per stage, measured median seconds vs the seconds its FLOPs take at that matmul rate (FLOPs from the "
          "model's shapes: one forward = 2 x weights x tokens + attention over prompt and completion tokens; "
          "generation one forward, the training forward one, backward + optimizer two):")
    print(arithmetic_line("TRL", ta, fwd["trl"][w:], mm))
    print(arithmetic_line("rlnb", tb, fwd["rlnb"][w:], mm))
    eff = {k: statistics.median(v[w:] or v) for k, v in real_share.items()}
    print(f"padding efficiency (real tokens / positions the training forward computes, median): "
          f"TRL {eff['trl']:.2f}, rlnb {eff['rlnb']:.2f}")
    pos = {k: statistics.median(v[w:] or v) for k, v in positions.items()}
    print(f"training-forward positions per step (median): TRL {pos['trl']:.0f}, rlnb {pos['rlnb']:.0f} "
          f"(rlnb's batch holds {pos['tokens']:.0f} prompt and completion tokens; each prompt is computed once)")
    print(f"rows whose backward ran per step (median): TRL {rows}, rlnb {pos['backward_rows']:.0f} (rows with advantage "
          f"0 on every token add exactly nothing to the gradient: rlnb.stages.live_rows; the arithmetic above counts "
          f"every row's backward on both sides)")
    ran = statistics.median(f / s["total"] for f, s in zip(flops["rlnb_ran"][w:], tb)) / mm
    print(f"rlnb's utilisation counting only the FLOPs it ran (each prompt once, the backward over the rows with a "
          f"gradient; about): {ran:.2f}")
    if args.eval:
        ev = lambda m: evaluate(m, ours.tokenizer, ours.task, n=args.eval,  # noqa: E731
                                     max_new_tokens=ours.recipe.max_new_tokens)["pass@1"]
        start = rlnb.load_default()[0]
        start = start if args.precision == "fp32" else enable_autocast(start, dtype)  # each side's own precision
        print(f"greedy pass@1 on {args.eval} held-out prompts: start {ev(start):.3f}, "
              f"after {len(ta) + w} steps TRL {ev(trl.model):.3f}, rlnb {ev(ours.model):.3f}")
    if args.profile:
        from rlnb.bench.update_profile import profile_update

        with open(args.profile, "w") as f:
            f.write(f"CPU: {cpu_model()}; torch {torch.__version__}; seed {args.seed}, after the benchmark's "
                    f"{len(tb) + w} steps\n{profile_update(ours)}")
        print(f"profile of the update written to {args.profile}")
