"""The ``rlnb`` command line: ``rlnb course``, ``rlnb reset``, ``rlnb info``, ``rlnb train``, ``rlnb eval``,
``rlnb bench``, ``rlnb doctor``."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

from rlnb.cli import course
from rlnb.cli import train as train_run  # the module: `rlnb.cli.train` stays the module, not its function
from rlnb.core.knobs import MAX_COUNT, MAX_SEED, short

# Nothing above imports torch (tests/test_cli_light.py checks): `rlnb course`, `rlnb reset` and `rlnb doctor`
# print at once; the commands that train or evaluate import it (and the Recipe, whose knobs make their flags).
LIGHT = ("course", "reset", "doctor")


def add_recipe_flags(p: argparse.ArgumentParser) -> None:
    """One flag per Recipe knob, typed, ranged and documented from its declaration (``Recipe.knobs()``)."""
    from rlnb.recipe import Recipe

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


def _int_at_least(low: int, high: int = MAX_COUNT):
    """An argparse type: an int in [``low``, ``high``], with a message that says so."""

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:  # argparse words it "invalid <name> value: '...'"
            raise argparse.ArgumentTypeError(f"expected an int >= {low}, got {short(text)}") from None
        if not low <= value <= high:
            bound = f">= {low}" if value < low else f"in [{low}, {high}]"
            raise argparse.ArgumentTypeError(f"expected an int {bound}, got {short(value)}")
        return value

    convert.__name__ = "non-negative int" if low == 0 else "positive int"
    return convert


def _folder(text: str) -> Path:
    """An argparse type: a non-empty path ('' would mean the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a folder path, got {text!r}")
    return Path(text).expanduser()


_folder.__name__ = "folder"
_non_negative, _positive, _seed = _int_at_least(0), _int_at_least(1), _int_at_least(0, MAX_SEED)


def _seconds(text: str) -> float:
    """An argparse type: a finite number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text[:40]!r}") from None
    if not (value > 0 and value < float("inf")):
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text[:40]!r}")
    return value


def recipe_overrides(args) -> dict:
    return {k[2:]: (tuple(v) if isinstance(v, list) else v) for k, v in vars(args).items() if k.startswith("r_")}


def cmd_info(args) -> int:
    import platform

    import torch
    import transformers

    from rlnb import __version__, kernels, recipes, tasks
    from rlnb.recipe import Recipe

    print(f"rlnb {__version__}  python {platform.python_version()}  torch {torch.__version__}  "
          f"transformers {transformers.__version__}")
    print(f"device: {'cuda (' + torch.cuda.get_device_name(0) + ')' if torch.cuda.is_available() else 'cpu'}; "
          f"threads: {torch.get_num_threads()}")
    print(f"triton: {kernels.triton_status() if hasattr(kernels, 'triton_status') else 'not wired yet'}")
    print(f"tasks: {', '.join(tasks.names())}")
    print(f"recipes: {', '.join(recipes.names())}")
    recipe = recipes.get(args.recipe, **recipe_overrides(args))
    print(f"what runs for --recipe {args.recipe}" + "".join(f" {Recipe.knobs()[k].flag} {v}"
                                                           for k, v in recipe_overrides(args).items()) + ":")
    for stage, knobs in recipe.hyperparameters().items():
        print(f"  {stage:13s} " + ", ".join(f"{k}={v!r}" for k, v in knobs.items()))
    from rlnb.models import DEFAULT_DIR
    ws = DEFAULT_DIR / "warmstart.json"
    if ws.exists():
        print(f"default model: {DEFAULT_DIR} (warm start: {json.dumps(json.loads(ws.read_text())['eval'])})")
    return 0


def _model(args):
    from rlnb.models import load, load_default

    return load(train_run.model_source(args.model)) if args.model else load_default()


def cmd_eval(args) -> int:
    from rlnb import tasks
    from rlnb.run.evaluate import evaluate

    the_tasks = {name: tasks.get(name) for name in args.task}  # unknown names fail before the model loads
    if args.json:
        check_output_file("--json", Path(args.json))
    model, tok = _model(args)
    out = {}
    for name, task in the_tasks.items():
        g = evaluate(model, tok, task, n=args.n, greedy=True, max_new_tokens=args.max_new_tokens)
        s = evaluate(model, tok, task, n=args.n, greedy=False, k=args.k, max_new_tokens=args.max_new_tokens)
        out[name] = {"greedy_pass@1": g["pass@1"], "sampled_pass@1": s["pass@1"], f"pass@{args.k}": s[f"pass@{args.k}"]}
        print(f"{name:10s} greedy pass@1 {g['pass@1']:.3f}   sampled pass@1 {s['pass@1']:.3f}   "
              f"pass@{args.k} {s[f'pass@{args.k}']:.3f}   (n={args.n})")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


def check_output_file(flag: str, path: Path) -> None:
    if path.is_dir():
        raise ValueError(f"{flag}: {path} is a folder, expected a file name")
    if not path.parent.is_dir():
        raise FileNotFoundError(f"{flag}: the folder {path.parent} does not exist")


def cmd_train(args) -> int:

    return train_run.train(args, recipe_overrides(args))


def cmd_bench(args) -> int:
    try:
        from rlnb.bench import main as bench_main
    except ImportError:
        print("rlnb bench: the loss benchmark arrives with the kernels issue", file=sys.stderr)
        return 2
    return bench_main(args.rest)


def cmd_doctor(args) -> int:
    from rlnb.cli.doctor import cmd_doctor as doctor  # imports torch only when asked

    return doctor(args)


class Parser(argparse.ArgumentParser):
    """argparse without abbreviations (``--step 30`` is an error, not ``--steps 30``) whose errors are one
    line on stderr with exit code 2."""

    def __init__(self, *args, **kwargs):
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see {self.prog} --help)\n")


def build_parser(recipe_flags: bool = True) -> argparse.ArgumentParser:
    """The whole command line; ``recipe_flags`` False leaves out ``info``'s and ``train``'s recipe flags (building
    them imports torch), for a command that does not read them."""
    ap = Parser(prog="rlnb", description="Reinforcement learning for LLM reasoning, step by step.")
    sub = ap.add_subparsers(dest="command", required=True, parser_class=Parser)
    info = sub.add_parser("info", help="versions, device, whether Triton can run, and what a recipe runs")
    info.add_argument("--recipe", default="grpo", help="show the hyperparameters this recipe runs with")
    if recipe_flags:
        add_recipe_flags(info)
    info.set_defaults(fn=cmd_info)

    ev = sub.add_parser("eval", help="greedy and sampled pass@1 (and pass@k) on held-out prompts")
    ev.add_argument("--task", nargs="+", default=["add", "countdown"])
    ev.add_argument("--model", help="a model folder, checkpoint, run folder or Hugging Face name (default: the "
                                    "embedded default)")
    ev.add_argument("--n", type=_positive, default=500)
    ev.add_argument("--k", type=_positive, default=8)
    ev.add_argument("--max-new-tokens", type=_positive, default=32)
    ev.add_argument("--json", help="also write the figures to this file")
    ev.set_defaults(fn=cmd_eval)

    tr = sub.add_parser("train", help="train a recipe on a task; writes metrics.jsonl, a checkpoint and report.html")
    run = tr.add_argument_group("what the run is (refused with --resume: a saved run keeps its own)")
    run.add_argument("--recipe", default=None, help="a recipe name (default grpo)")
    run.add_argument("--task", default=None, help="a task name (default add)")
    run.add_argument("--seed", type=_seed, default=None, help="random seed (default 0)")
    run.add_argument("--model", help="a Hugging Face model name or folder (default: the embedded default)")
    run.add_argument("--dtype", default=None, help="with --model: weights dtype (default bf16 on CUDA, fp32 on CPU)")
    run.add_argument("--gradient-checkpointing", action="store_true", default=None,
                     help="with --model: recompute activations")
    run.add_argument("--chat-template", action="store_true", default=None,
                     help="with --model: wrap prompts in its chat template")
    run.add_argument("--reward-on-error", choices=["raise", "zero"], default=None,
                     help="a reward function that raises or returns None/NaN: stop (raise, the default) or score it "
                          "0 and count it")
    run.add_argument("--reward-time-limit", type=_seconds, default=None, metavar="SECONDS",
                     help="seconds a reward function call may take (default: no limit); an overrun is that "
                          "function's error, handled as --reward-on-error says")
    run.add_argument("--out", type=_folder, default=None, help="output folder (default runs/<recipe>-<task>-<time>)")
    run.add_argument("--overwrite", action="store_true", help="replace the run already in --out")
    tr.add_argument("--resume", type=_folder, help="continue the run saved in this folder")
    tr.add_argument("--steps", type=_non_negative, default=None,
                    help="total steps of the run (default 200; with --resume: the saved run's own target)")
    tr.add_argument("--save-every", type=_non_negative, default=25, help="checkpoint every N steps (0: only at the end)")
    tr.add_argument("--eval-n", type=_non_negative, default=200,
                    help="held-out prompts for greedy pass@1 before/after (0: skip)")
    tr.add_argument("--no-progress", action="store_true")
    if recipe_flags:
        add_recipe_flags(tr)
    tr.set_defaults(fn=cmd_train)

    be = sub.add_parser("bench", help="benchmarks: `rlnb bench loss --help`")
    be.add_argument("rest", nargs=argparse.REMAINDER)
    be.set_defaults(fn=cmd_bench)

    dr = sub.add_parser("doctor", help="pre-flight check of a laptop for the workshop: versions, torch build, "
                                       "threads, widgets, step time, each chapter's predicted runtime")
    dr.add_argument("--steps", type=_positive, default=5, help="GRPO steps to time on the default model (default 5)")
    dr.add_argument("--no-timing", action="store_true", help="skip the timing (the checks take a second)")
    dr.set_defaults(fn=cmd_doctor)
    course.add_parsers(sub)
    return ap


# An error that starts with the argument's name ("steps: expected ...", "--resume: ...", "filters[0]: ...",
# "Batch.rewards: ...") is rlnb's report of a bad input; any other ValueError/TypeError/KeyError is a bug.
_NAMED = re.compile(r"^-{0,2}[A-Za-z_][\w.\-]*(\[[^\]]*\])*(\.\w+)*: ")


def user_error(e: BaseException) -> bool:
    """Whether ``e`` is the user's to fix (one line, exit 2) rather than a bug (a traceback)."""
    if isinstance(e, (ValueError, TypeError, KeyError)) and _NAMED.match(message(e)):
        return True
    return isinstance(e, (OSError, MemoryError, *heavy_errors()))  # files, network, memory, a reward function


def heavy_errors() -> tuple[type, ...]:
    """A reward function's error and torch's out-of-memory, where loaded (a light command that never imported
    them cannot have raised them, and its error path should not spend seconds importing torch)."""
    stages, torch = sys.modules.get("rlnb.stages"), sys.modules.get("torch")
    return ((stages.RewardFunctionError,) if stages else ()) + ((torch.OutOfMemoryError,)
                                                                 if torch and hasattr(torch, "OutOfMemoryError") else ())


def message(e: BaseException) -> str:
    text = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
    return " ".join(str(text).split()) or type(e).__name__


def main(argv=None) -> int:
    """Run one command. A user's mistake ends in one line ``rlnb: error: ...`` on stderr and exit code 2;
    Ctrl-C in exit code 130; anything else (a bug) keeps its traceback."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in argv if not a.startswith("-")), None)  # the top level has no option taking a value
    args = build_parser(recipe_flags=command not in LIGHT).parse_args(argv)
    t0 = time.time()
    try:
        return args.fn(args) or 0
    except KeyboardInterrupt:
        print(f"interrupted after {time.time() - t0:.0f} s", file=sys.stderr)
        return 130
    except Exception as e:
        if not user_error(e):
            raise
        text = message(e)
        print(f"rlnb: error: {text if len(text) <= 600 else text[:600] + ' ...'}", file=sys.stderr)
        return 2
