"""Run an rlnb recipe with TRL's ``GRPOTrainer``: the launcher behind ``scripts/launch_trl.py``.

One GPU or CPU:   python scripts/launch_trl.py --recipe dapo --task add --steps 200
Many GPUs:        accelerate launch --num_processes 8 scripts/launch_trl.py --recipe dapo --model Qwen/Qwen2.5-0.5B-Instruct --chat-template
DeepSpeed ZeRO:   accelerate launch --config_file zero3.yaml scripts/launch_trl.py ...

Recipe fields take the same flags as ``rlnb train`` (``--num-generations 16 --lr 1e-6 ...``). Before
training, the main process prints what TRL cannot express and what it expresses differently.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from rlnb.cli import add_recipe_flags, recipe_overrides


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="launch_trl", description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("--recipe", default="grpo")
    p.add_argument("--task", default="add")
    p.add_argument("--model", default=None, help="a Hugging Face model name or folder (default: the embedded default)")
    p.add_argument("--steps", type=int, default=200, help="rlnb steps (generation batches of P x G completions)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output-dir", type=Path, default=None, help="default runs/trl-<recipe>-<task>")
    p.add_argument("--dtype", default="fp32", help="weights dtype; with bf16 autocast on CUDA, fp32 = mixed precision")
    p.add_argument("--grad-accum", type=int, default=1, help="gradient accumulation steps per optimizer step")
    p.add_argument("--lora-r", type=int, default=0, help="LoRA rank (peft); 0 = full fine-tuning")
    p.add_argument("--chat-template", action="store_true", help="prompts as chat messages (instruct models)")
    p.add_argument("--system-prompt", default=None)
    p.add_argument("--no-gradient-checkpointing", action="store_true")
    p.add_argument("--strict", action="store_true", help="refuse recipes with settings TRL cannot express")
    p.add_argument("--trl", action="append", default=[], metavar="KEY=JSON",
                   help="any other GRPOConfig field, e.g. --trl save_steps=100 --trl 'report_to=\"wandb\"'")
    p.add_argument("--dry-run", action="store_true", help="print the export and exit")
    p.add_argument("--quiet", action="store_true", help="do not print the export report")
    p.add_argument("--rank-report", type=Path, default=None, metavar="DIR",
                   help="after training, each process writes DIR/rank<R>.json (steps, losses, a weight checksum)")
    add_recipe_flags(p)
    return p


def _trl_args(pairs: list[str], args) -> dict:
    out = {"gradient_checkpointing": not args.no_gradient_checkpointing}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"--trl: expected KEY=VALUE, got {pair!r}")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value  # a bare string
    return out


def main(argv=None):
    """Parse ``argv``, build the export and the trainer, train; returns the ``GRPOTrainer``."""
    from rlnb.export import to_trl
    from rlnb.models import DEFAULT_DIR, load
    from rlnb.models.pretrained import DTYPES

    args = build_parser().parse_args(argv)
    world = int(os.environ.get("WORLD_SIZE", "1"))  # set by accelerate launch / torchrun
    out = args.output_dir or Path("runs") / f"trl-{args.recipe}-{args.task}"
    exp = to_trl(args.recipe, args.task, steps=args.steps, output_dir=str(out), num_processes=world,
                 gradient_accumulation_steps=args.grad_accum, chat_template=args.chat_template,
                 system_prompt=args.system_prompt, strict=args.strict, seed=args.seed,
                 trl_args=_trl_args(args.trl, args), **recipe_overrides(args))
    if not args.quiet and int(os.environ.get("RANK", "0")) == 0:
        print(exp.report(), flush=True)
    if args.dry_run:
        return exp
    if args.dtype not in DTYPES:
        raise ValueError(f"--dtype: expected one of {sorted(DTYPES)}, got {args.dtype!r}")
    model, tokenizer = load(args.model or DEFAULT_DIR, dtype=DTYPES[args.dtype])
    peft_config = None
    if args.lora_r:
        import peft

        peft_config = peft.LoraConfig(r=args.lora_r, lora_alpha=2 * args.lora_r, target_modules="all-linear",
                                      task_type="CAUSAL_LM")
    trainer = exp.trainer(model, tokenizer, train_dataset=exp.dataset(seed=args.seed), peft_config=peft_config)
    trainer.train()
    if args.rank_report is not None:
        from rlnb.export.rank_report import write_rank_report

        write_rank_report(trainer, args.rank_report)
    return trainer
