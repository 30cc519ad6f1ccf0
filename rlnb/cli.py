"""The ``rlnb`` command line: ``rlnb info``, ``rlnb train``, ``rlnb eval``, ``rlnb bench``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rlnb.recipe import Recipe


def _add_recipe_flags(p: argparse.ArgumentParser) -> None:
    """One flag per Recipe knob, typed, ranged and documented from its declaration (``Recipe.knobs()``)."""
    g = p.add_argument_group("recipe overrides (defaults come from --recipe; 'entry' = the chosen "
                             "registry entry's own default)")
    for name, k in Recipe.knobs().items():
        if k.group == "meta":
            continue
        kw = {"dest": f"r_{name}", "default": argparse.SUPPRESS,  # absent unless given ('none' is a value)
              "help": k.help() + (" Default: entry." if k.entry else "")}
        if k.kind == "names":  # e.g. --filters dynamic_sampling overlong
            g.add_argument(k.flag, nargs="*", type=str, **kw)
        else:
            g.add_argument(k.flag, type=_converter(k), **kw)


def _converter(k):
    """str -> the knob's kind: bools accept true/false/1/0/yes/no/on/off, optional numbers accept 'none'.
    Ranges are checked once, by the Recipe (the error names the knob)."""

    def convert(text: str):
        t = text.strip().lower()
        if k.optional and t == "none":
            return None
        if k.kind == "bool":
            if t not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
                raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
            return t in ("1", "true", "yes", "on")
        try:
            return int(t) if k.kind == "int" else float(t) if k.kind == "float" else text
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an int' if k.kind == 'int' else 'a number'}"
                                             f"{' or none' if k.optional else ''}, got {text[:40]!r}") from None

    convert.__name__ = {"int": "int", "float": "number", "bool": "bool"}.get(k.kind, "name")
    return convert


def _int_at_least(low: int):
    """An argparse type: an int >= ``low``, with a message that says so."""

    def convert(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"expected an int >= {low}, got {value}")
        return value

    convert.__name__ = "non-negative int" if low == 0 else "positive int"
    return convert


_non_negative, _positive = _int_at_least(0), _int_at_least(1)


def _overrides(args) -> dict:
    return {k[2:]: (tuple(v) if isinstance(v, list) else v) for k, v in vars(args).items() if k.startswith("r_")}


def cmd_info(args) -> int:
    import platform

    import torch
    import transformers

    from rlnb import __version__, kernels, recipes, tasks

    print(f"rlnb {__version__}  python {platform.python_version()}  torch {torch.__version__}  "
          f"transformers {transformers.__version__}")
    print(f"device: {'cuda (' + torch.cuda.get_device_name(0) + ')' if torch.cuda.is_available() else 'cpu'}; "
          f"threads: {torch.get_num_threads()}")
    print(f"triton: {kernels.triton_status() if hasattr(kernels, 'triton_status') else 'not wired yet'}")
    print(f"tasks: {', '.join(tasks.names())}")
    print(f"recipes: {', '.join(recipes.names())}")
    recipe = recipes.get(args.recipe, **_overrides(args))
    print(f"what runs for --recipe {args.recipe}" + "".join(f" {Recipe.knobs()[k].flag} {v}"
                                                           for k, v in _overrides(args).items()) + ":")
    for stage, knobs in recipe.hyperparameters().items():
        print(f"  {stage:13s} " + ", ".join(f"{k}={v!r}" for k, v in knobs.items()))
    from rlnb.models import DEFAULT_DIR
    ws = DEFAULT_DIR / "warmstart.json"
    if ws.exists():
        print(f"default model: {DEFAULT_DIR} (warm start: {json.dumps(json.loads(ws.read_text())['eval'])})")
    return 0


def _model(args):
    from rlnb.models import load, load_default

    return load(args.model) if args.model else load_default()


def cmd_eval(args) -> int:
    from rlnb import tasks
    from rlnb.evaluate import evaluate

    model, tok = _model(args)
    out = {}
    for name in args.task:
        task = tasks.get(name)
        g = evaluate(model, tok, task, n=args.n, greedy=True, max_new_tokens=args.max_new_tokens)
        s = evaluate(model, tok, task, n=args.n, greedy=False, k=args.k, max_new_tokens=args.max_new_tokens)
        out[name] = {"greedy_pass@1": g["pass@1"], "sampled_pass@1": s["pass@1"], f"pass@{args.k}": s[f"pass@{args.k}"]}
        print(f"{name:10s} greedy pass@1 {g['pass@1']:.3f}   sampled pass@1 {s['pass@1']:.3f}   "
              f"pass@{args.k} {s[f'pass@{args.k}']:.3f}   (n={args.n})")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


def cmd_train(args) -> int:
    from rlnb.train_cli import train

    return train(args, _overrides(args))


def cmd_bench(args) -> int:
    try:
        from rlnb.bench import main as bench_main
    except ImportError:
        print("rlnb bench: the loss benchmark arrives with the kernels issue", file=sys.stderr)
        return 2
    return bench_main(args.rest)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="rlnb", description="Reinforcement learning for LLM reasoning, step by step.")
    sub = ap.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="versions, device, whether Triton can run, and what a recipe runs")
    info.add_argument("--recipe", default="grpo", help="show the hyperparameters this recipe runs with")
    _add_recipe_flags(info)
    info.set_defaults(fn=cmd_info)

    ev = sub.add_parser("eval", help="greedy and sampled pass@1 (and pass@k) on held-out prompts")
    ev.add_argument("--task", nargs="+", default=["add", "countdown"])
    ev.add_argument("--model", help="a checkpoint folder or Hugging Face model (default: the embedded default)")
    ev.add_argument("--n", type=_positive, default=500)
    ev.add_argument("--k", type=_positive, default=8)
    ev.add_argument("--max-new-tokens", type=_positive, default=32)
    ev.add_argument("--json", help="also write the figures to this file")
    ev.set_defaults(fn=cmd_eval)

    tr = sub.add_parser("train", help="train a recipe on a task; writes metrics.jsonl, a checkpoint and report.html")
    tr.add_argument("--recipe", default="grpo")
    tr.add_argument("--task", default="add")
    tr.add_argument("--steps", type=_non_negative, default=200)
    tr.add_argument("--seed", type=int, default=0)
    tr.add_argument("--out", type=Path, default=None, help="output folder (default runs/<recipe>-<task>-<time>)")
    tr.add_argument("--resume", type=Path, help="continue the run saved in this folder")
    tr.add_argument("--model", help="a Hugging Face model name or folder (default: the embedded default)")
    tr.add_argument("--dtype", default=None, help="with --model: weights dtype (default bf16 on CUDA, fp32 on CPU)")
    tr.add_argument("--gradient-checkpointing", action="store_true", help="with --model: recompute activations")
    tr.add_argument("--chat-template", action="store_true", help="with --model: wrap prompts in its chat template")
    tr.add_argument("--save-every", type=_non_negative, default=25, help="checkpoint every N steps (0: only at the end)")
    tr.add_argument("--eval-n", type=_non_negative, default=200,
                    help="held-out prompts for greedy pass@1 before/after (0: skip)")
    tr.add_argument("--reward-on-error", choices=["raise", "zero"], default="raise",
                    help="a reward function that raises or returns None/NaN: stop (raise) or score it 0 and count it")
    tr.add_argument("--no-progress", action="store_true")
    _add_recipe_flags(tr)
    tr.set_defaults(fn=cmd_train)

    be = sub.add_parser("bench", help="benchmarks: `rlnb bench loss --help`")
    be.add_argument("rest", nargs=argparse.REMAINDER)
    be.set_defaults(fn=cmd_bench)
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    t0 = time.time()
    try:
        return args.fn(args) or 0
    except KeyboardInterrupt:
        print(f"interrupted after {time.time() - t0:.0f} s", file=sys.stderr)
        return 130
    except (ValueError, KeyError, TypeError, FileNotFoundError) as e:
        print(f"rlnb: error: {e}", file=sys.stderr)
        return 2
