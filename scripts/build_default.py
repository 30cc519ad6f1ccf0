"""Rebuild the embedded default model: a short supervised warm start on the toy tasks.

    python scripts/build_default.py                # ~3-5 minutes on 2 cores, writes rlnb/models/default/
    python scripts/build_default.py --smoke --out /tmp/x   # seconds: the same code path, tiny budget

Deterministic on a given machine (fixed seeds, fixed thread count). The warm start is stopped early on
purpose: RL needs headroom, so we keep the first checkpoint whose greedy pass@1 lies in the target
window on every task, and record the measured pass@1 in ``warmstart.json`` beside the weights.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import torch
from transformers import LlamaForCausalLM

from rlnb import tasks
from rlnb.models import DEFAULT_DIR, build_config, build_tokenizer
from rlnb.run.evaluate import evaluate

TASKS = ["add", "countdown"]


def make_batch(tokenizer, rows: list[dict]):
    """Right-padded BOS + prompt + target + EOS, with labels only on target + EOS (-100 elsewhere)."""
    seqs, labels = [], []
    for row in rows:
        p = tokenizer(row["prompt"]).input_ids                              # starts with BOS
        t = tokenizer(row["target"], add_special_tokens=False).input_ids + [tokenizer.eos_token_id]
        seqs.append(p + t)
        labels.append([-100] * len(p) + t)
    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), tokenizer.pad_token_id)
    lab = torch.full((len(seqs), width), -100)
    for i, (s, l) in enumerate(zip(seqs, labels)):
        ids[i, : len(s)], lab[i, : len(l)] = torch.tensor(s), torch.tensor(l)
    return ids, (ids != tokenizer.pad_token_id).long(), lab


def measure(model, tokenizer, n: int) -> dict:
    out = {}
    for name in TASKS:
        task = tasks.get(name)
        g = evaluate(model, tokenizer, task, n=n, greedy=True)
        s = evaluate(model, tokenizer, task, n=n, greedy=False, k=8)
        out[name] = {"greedy_pass@1": g["pass@1"], "sampled_pass@1": s["pass@1"], "pass@8": s["pass@8"]}
    return out


def in_window(scores: dict, lo: float, hi: float) -> bool:
    return all(lo <= scores[name] <= hi for name in TASKS)


def train(args) -> dict:
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rng = random.Random(args.seed)
    tokenizer = build_tokenizer()
    model = LlamaForCausalLM(build_config(len(tokenizer)))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    weights = dict(zip(TASKS, args.mix))
    per_task = {n: round(args.batch * w / sum(args.mix)) for n, w in weights.items()}  # rows per step
    data = {n: tasks.get(n).dataset(per_task[n] * args.max_steps, seed=args.seed) for n in TASKS}
    log, t0 = [], time.time()
    for step in range(1, args.max_steps + 1):
        rows = [data[n][(step - 1) * per_task[n] + i] for n in TASKS for i in range(per_task[n])]
        rng.shuffle(rows)
        ids, mask, labels = make_batch(tokenizer, rows)
        model.train()
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % args.eval_every == 0:
            model.eval()
            scores = {n: evaluate(model, tokenizer, tasks.get(n), n=args.eval_n)["pass@1"] for n in TASKS}
            log.append({"step": step, "loss": round(loss.item(), 4), **scores, "time_s": round(time.time() - t0, 1)})
            print(json.dumps(log[-1]), flush=True)
            if step >= args.min_steps and in_window(scores, args.lo, args.hi):
                break
    return {"model": model, "tokenizer": tokenizer, "log": log, "steps": step, "seconds": time.time() - t0}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)
    ap.add_argument("--out", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="1 is deterministic and robust to a busy machine")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--mix", type=float, nargs=len(TASKS), default=[1.0, 3.0],
                    help=f"relative share of each task {TASKS} in a batch (addition is learned faster)")
    ap.add_argument("--max-steps", type=int, default=1500)
    ap.add_argument("--min-steps", type=int, default=200)
    ap.add_argument("--eval-every", type=int, default=25)
    ap.add_argument("--eval-n", type=int, default=200)
    ap.add_argument("--lo", type=float, default=0.2, help="lowest greedy pass@1 accepted on every task")
    ap.add_argument("--hi", type=float, default=0.4, help="highest greedy pass@1 accepted on every task")
    ap.add_argument("--smoke", action="store_true", help="tiny budget: checks the code path in seconds")
    args = ap.parse_args(argv)
    if args.smoke:
        args.max_steps, args.min_steps, args.eval_every, args.eval_n, args.lo, args.hi = 4, 1, 2, 4, 0.0, 1.0
    res = train(args)
    model, tokenizer = res["model"], res["tokenizer"]
    model.eval()
    summary = {
        "seed": args.seed, "steps": res["steps"], "train_seconds": round(res["seconds"], 1),
        "eval": measure(model, tokenizer, n=8 if args.smoke else 500), "log": res["log"],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.out, safe_serialization=True)
    tokenizer.save_pretrained(args.out)
    (args.out / "warmstart.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary["eval"], indent=1))
    return summary


if __name__ == "__main__":
    main()
