"""Run an rlnb recipe with verl 0.9.1's PPO trainer: the launcher behind ``scripts/launch_verl.py``.

See the command and what verl cannot express:   python scripts/launch_verl.py --recipe dapo --dry-run
One node, 8 GPUs:   python scripts/launch_verl.py --recipe dapo --task gsm8k --model Qwen/Qwen2.5-0.5B-Instruct \\
                        --chat-template --n-gpus 8 --steps 200

Recipe fields take the same flags as ``rlnb train`` (``--num-generations 16 --lr 1e-6 ...``); any other verl key
with ``--verl KEY=VALUE``. Without ``--dry-run`` it writes the task's prompts as parquet files and runs
``python -m verl.trainer.main_ppo`` with the overrides (needs ``pip install 'rlnb[verl]'`` and GPUs).
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

import yaml

from rlnb.cli import add_recipe_flags, recipe_overrides


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="launch_verl", description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("--recipe", default="grpo")
    p.add_argument("--task", default="add")
    p.add_argument("--model", default=None, help="a Hugging Face model name or folder (default: the embedded default)")
    p.add_argument("--steps", type=int, default=200, help="verl training steps (one rlnb step each)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-dir", type=Path, default=None, help="where the parquet files go (default runs/verl-<task>)")
    p.add_argument("--n-gpus", type=int, default=1, help="GPUs per node (trainer.n_gpus_per_node)")
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--micro-batch", type=int, default=4, help="sequences per GPU per forward (ppo_micro_batch_size_per_gpu)")
    p.add_argument("--rollout", default="vllm", help="verl's rollout engine (vllm or sglang)")
    p.add_argument("--tensor-parallel", type=int, default=1, help="the rollout engine's tensor-parallel size")
    p.add_argument("--max-prompt-length", type=int, default=512)
    p.add_argument("--chat-template", action="store_true", help="the model has a chat template (verl always uses it)")
    p.add_argument("--system-prompt", default=None)
    p.add_argument("--strict", action="store_true", help="refuse recipes with settings verl cannot express")
    p.add_argument("--verl", action="append", default=[], metavar="KEY=VALUE",
                   help="any other verl config key, e.g. --verl trainer.save_freq=100 --verl 'trainer.logger=[console,wandb]'")
    p.add_argument("--dry-run", action="store_true", help="print the command and the report, and exit")
    p.add_argument("--quiet", action="store_true", help="do not print the report")
    add_recipe_flags(p)
    return p


def _verl_args(pairs: list[str]) -> dict:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--verl: expected KEY=VALUE, got {pair!r}")
        out[key] = yaml.safe_load(value)  # Hydra's grammar reads plain values as YAML does: 100, true, [a,b]
    return out


def main(argv=None):
    """Parse ``argv``, build the export, print it; without ``--dry-run`` write the data and run verl.
    Returns the ``VerlExport`` (dry run) or verl's exit status."""
    from rlnb.export import to_verl

    args = build_parser().parse_args(argv)
    exp = to_verl(args.recipe, args.task, model=args.model, steps=args.steps, n_gpus=args.n_gpus,
                  nnodes=args.nnodes, micro_batch=args.micro_batch, rollout=args.rollout,
                  tensor_parallel=args.tensor_parallel, max_prompt_length=args.max_prompt_length,
                  data_dir=args.data_dir or Path("runs") / f"verl-{args.task}", chat_template=args.chat_template,
                  system_prompt=args.system_prompt, strict=args.strict, seed=args.seed,
                  verl_args=_verl_args(args.verl), **recipe_overrides(args))
    print(exp.command(), flush=True)
    if not args.quiet:
        print(exp.report(), flush=True)
    if args.dry_run:
        return exp
    if importlib.util.find_spec("ray") is None or importlib.util.find_spec("verl") is None:
        raise SystemExit("verl and its dependencies are not installed: pip install 'rlnb[verl]' (Linux, GPUs)")
    train, val = exp.write_data(seed=args.seed)
    print(f"data: {train}, {val}", flush=True)
    return subprocess.call([sys.executable, "-m", "verl.trainer.main_ppo", *exp.args()])
