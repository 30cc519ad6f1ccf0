"""``rlnb train``: a headless run with a progress bar, JSON-lines metrics, checkpoints and an HTML report."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path


class JsonlWriter:
    """Append one JSON line per step and flush it, so a crash loses at most the current step."""

    def __init__(self, path: Path, already: int = 0):
        self.path, self.written = path, already

    def __call__(self, trainer, record) -> None:
        with open(self.path, "a") as f:
            for metrics in trainer.history[self.written :]:
                f.write(json.dumps(metrics) + "\n")
            f.flush()
        self.written = len(trainer.history)


class Checkpointer:
    """Save the trainer every ``every`` steps (atomically; see ``Trainer.save``)."""

    def __init__(self, directory: Path, every: int):
        self.directory, self.every = directory, every

    def __call__(self, trainer, record) -> None:
        if self.every and trainer.step_count % self.every == 0:
            trainer.save(self.directory)


def _atomic_write(path: Path, text: str) -> None:
    """Write then rename, so a kill leaves the old file or the new one, never half of either."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _greedy(trainer, n: int):
    return round(trainer.evaluate(n)["pass@1"], 4) if n else None


def train(args, overrides: dict) -> int:
    from rlnb.loop import Trainer
    from rlnb.models import load_default
    from rlnb.report import write_report

    if args.resume:
        if overrides:
            raise ValueError(f"--resume: a saved run keeps its recipe; drop the recipe flags {sorted(overrides)}")
        trainer = Trainer.load(args.resume / "checkpoint")
        out = args.resume
        summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
        remaining = None if trainer._run_target else max(args.steps - trainer.step_count, 0)
        # The checkpoint is the truth: metrics.jsonl may hold steps written after it (or half a line).
        _atomic_write(out / "metrics.jsonl", "".join(json.dumps(h) + "\n" for h in trainer.history))
    else:
        if args.model:  # a real model: on the GPU when there is one, bf16, see rlnb.pretrained
            options = {k: getattr(args, k, None) for k in ("dtype", "gradient_checkpointing", "chat_template")}
            trainer = Trainer.from_pretrained(args.model, args.task, args.recipe, seed=args.seed,
                                              **{k: v for k, v in options.items() if v is not None}, **overrides)
        else:
            trainer = Trainer(*load_default(), args.task, args.recipe, seed=args.seed, **overrides)
        trainer.reward_on_error = trainer.rewarder.on_error = args.reward_on_error  # saved with checkpoints
        out = args.out or Path("runs") / f"{args.recipe}-{args.task}-{time.strftime('%Y%m%d-%H%M%S')}"
        out.mkdir(parents=True, exist_ok=True)
        (out / "metrics.jsonl").write_text("")
        summary = {"recipe": trainer.recipe.to_dict(), "task": args.task, "seed": args.seed,
                   "greedy_pass@1_before": _greedy(trainer, args.eval_n)}
        _atomic_write(out / "summary.json", json.dumps(summary, indent=1))  # measured: keep it now
        remaining = args.steps
    callbacks = [JsonlWriter(out / "metrics.jsonl", already=len(trainer.history)),
                 Checkpointer(out / "checkpoint", args.save_every)]
    t0 = time.time()
    trainer.run(remaining, callbacks=callbacks, progress=not args.no_progress)
    trainer.save(out / "checkpoint")
    finished = trainer._run_target is None
    summary.update({"steps": trainer.step_count, "wall_s_this_invocation": round(time.time() - t0, 1)})
    if trainer.history:
        timing = {k: round(sum(h[k] for h in trainer.history) / len(trainer.history), 3)
                  for k in trainer.history[-1] if k.startswith("timing/")}
        summary["mean_time_per_stage_s"] = timing
    if finished:
        summary["greedy_pass@1_after"] = _greedy(trainer, args.eval_n)
    _atomic_write(out / "summary.json", json.dumps(summary, indent=1))
    write_report(trainer.history, out / "report.html", title=f"{trainer.recipe.name} on {args.task}",
                 summary={k: v for k, v in summary.items() if k != "recipe"})
    print(json.dumps({k: v for k, v in summary.items() if k != "recipe"}, indent=1))
    print(f"wrote {out}/metrics.jsonl, {out}/checkpoint, {out}/report.html")
    return 0 if finished else 130
