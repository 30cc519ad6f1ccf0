"""``rlnb train``: a headless run with a progress bar, JSON-lines metrics, checkpoints and an HTML report.

What it promises (``docs/reliability.md``):

* A bad flag, a wrong path or a broken checkpoint is refused before anything is written or trained.
* ``--out`` never replaces another run unless ``--overwrite`` says so; ``--resume DIR`` continues the run in
  DIR and refuses the flags that would make it another run (``--recipe``, ``--task``, ``--seed``,
  ``--model``, recipe overrides, ...).
* After Ctrl-C at any moment, ``metrics.jsonl``, ``summary.json`` and ``checkpoint/`` describe the same
  steps. The first Ctrl-C lets the step in progress finish (it is recorded, written and checkpointed); a
  second one stops the step at once (the step is undone). Neither can cut the final writes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path

from rlnb.cli.lock import run_lock

DEFAULTS = {"recipe": "grpo", "task": "add", "seed": 0, "steps": 200, "reward_on_error": "raise"}
RUN_FLAGS = ("recipe", "task", "seed", "model", "dtype", "gradient_checkpointing", "chat_template",
             "reward_on_error", "reward_time_limit", "out", "overwrite")  # what a run is: a saved run keeps its own
MODEL_FLAGS = ("dtype", "gradient_checkpointing", "chat_template")
RUN_FILES = ("metrics.jsonl", "summary.json", "report.html", "checkpoint", "checkpoint.old", "checkpoint.tmp")


class JsonlWriter:
    """Append one JSON line per step and flush it, so a crash loses at most the current step."""

    def __init__(self, path: Path, already: int = 0):
        self.path, self.written = path, already

    def __call__(self, trainer, record) -> None:
        with open(self.path, "a") as f:
            f.write("".join(json.dumps(m) + "\n" for m in trainer.history[self.written :]))
            f.flush()
        self.written = len(trainer.history)


class Checkpointer:
    """Save the trainer every ``every`` steps (atomically; see ``Trainer.save``)."""

    def __init__(self, directory: Path, every: int):
        self.directory, self.every = directory, every

    def __call__(self, trainer, record) -> None:
        if self.every and trainer.step_count % self.every == 0:
            trainer.save(self.directory)


class StopRequest:
    """Ctrl-C while files are being written: the first asks the run to stop after the step in progress (this
    object, the last callback, raises KeyboardInterrupt once that step is written); a second stops the step
    at once, except inside ``shield()`` (the final writes)."""

    def __init__(self):
        self.count, self.shielded = 0, False

    def handler(self, signum, frame):
        self.count += 1
        if self.count == 1:  # os.write: print() from a signal handler can collide with tqdm's writes
            os.write(2, b"\nrlnb: stopping after this step (Ctrl-C again to stop at once)\n")
        elif not self.shielded:
            raise KeyboardInterrupt

    def __call__(self, trainer, record) -> None:
        if self.count:
            raise KeyboardInterrupt  # run() stops cleanly: this step is recorded, written and checkpointed

    @contextlib.contextmanager
    def installed(self):
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.signal(signal.SIGINT, self.handler)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    @contextlib.contextmanager
    def shield(self):
        self.shielded = True
        try:
            yield
        finally:
            self.shielded = False


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


# --- the door: every flag and path is checked before anything is built, trained or written ----------------
def check_resume_flags(args, overrides: dict) -> None:
    given = [f for f in RUN_FLAGS if getattr(args, f, None) is not None and getattr(args, f) is not False]
    if given or overrides:
        flag = f"--{given[0].replace('_', '-')}" if given else f"--{sorted(overrides)[0].replace('_', '-')}"
        raise ValueError(f"{flag}: not with --resume (the saved run keeps its own recipe, task, seed, model and "
                         "output folder); start a new run with --out to change it")


def check_new_run_flags(args) -> None:
    if not args.model:
        for f in MODEL_FLAGS:
            if getattr(args, f, None) is not None and getattr(args, f) is not False:
                raise ValueError(f"--{f.replace('_', '-')}: only with --model (the embedded default is fp32 on the CPU)")


def held_run(out: Path) -> list[str]:
    """The files of a run already in ``out``."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out: {out} is a file, expected a folder")
    return [name for name in RUN_FILES if (out / name).exists()]


def check_resume_dir(out: Path) -> None:
    if not out.exists():
        raise FileNotFoundError(f"--resume: no such folder {out}")
    if not out.is_dir():
        raise ValueError(f"--resume: {out} is a file, expected a run folder (written by rlnb train --out)")
    if not ((out / "checkpoint").is_dir() or (out / "checkpoint.old").is_dir()):
        raise FileNotFoundError(f"--resume: no checkpoint in {out} (expected {out / 'checkpoint'}; a run that was "
                                "stopped before its first step has nothing to resume)")


def _read_summary(out: Path) -> dict:
    path = out / "summary.json"
    if not path.exists():
        return {}
    try:
        summary = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"--resume: {path} is not valid JSON ({e}); the run folder is corrupt") from None
    if not isinstance(summary, dict):
        raise ValueError(f"--resume: {path} holds {type(summary).__name__}, expected an object")
    return summary


# --- building the trainer -----------------------------------------------------------------------------
def model_source(text: str, flag: str = "--model") -> str:
    """A Hugging Face name, or a local folder: a model folder, an rlnb checkpoint, or an ``rlnb train`` run
    folder (their ``model/`` inside). A path that does not exist, or is a file, is refused here, before any
    download is tried."""
    path = Path(text).expanduser()
    for candidate in (path, path / "model", path / "checkpoint" / "model"):
        if (candidate / "config.json").is_file():
            return str(candidate)
    looks_local = path.exists() or text.startswith((".", "/", "~")) or text.count("/") > 1 or "\\" in text
    if path.is_file():
        raise ValueError(f"{flag}: {text} is a file, expected a model folder (with config.json) or a Hub name")
    if looks_local:
        what = "has no config.json" if path.is_dir() else "does not exist"
        raise FileNotFoundError(f"{flag}: the folder {text} {what}; expected a model folder, a checkpoint or a run")
    return text


def _resume(args):
    from rlnb.loop import Trainer

    out = args.resume
    check_resume_dir(out)
    summary = _read_summary(out)
    try:
        trainer = Trainer.load(out / "checkpoint")
    except (ValueError, OSError) as e:
        text = str(e.args[0]) if e.args else str(e)
        raise type(e)(f"--resume: {text.removeprefix('directory: ')}") from e
    target = args.steps if args.steps is not None else (trainer.run_target or summary.get("steps_target")
                                                        or trainer.step_count)
    if target < trainer.step_count:
        raise ValueError(f"--steps: the saved run has done {trainer.step_count} steps; expected --steps >= "
                         f"{trainer.step_count} (the total), got {target}")
    return trainer, out, summary, target


def _new(args, overrides: dict):
    from rlnb.loop import Trainer
    from rlnb.models import load_default

    check_new_run_flags(args)
    a = {k: (getattr(args, k) if getattr(args, k, None) is not None else v) for k, v in DEFAULTS.items()}
    out = args.out or Path("runs") / f"{a['recipe']}-{a['task']}-{time.strftime('%Y%m%d-%H%M%S')}"
    held = held_run(out)
    if held and not args.overwrite:
        raise ValueError(f"--out: {out} holds another run ({', '.join(held)}); continue it with --resume {out}, "
                         "or replace it with --overwrite")
    kw = dict(seed=a["seed"], reward_on_error=a["reward_on_error"], reward_time_limit=args.reward_time_limit)
    if args.model:  # a real model: on the GPU when there is one, bf16, see rlnb.models.pretrained

        options = {k: getattr(args, k) for k in MODEL_FLAGS if getattr(args, k, None) is not None}
        trainer = Trainer.from_pretrained(model_source(args.model), a["task"], a["recipe"], **kw, **options,
                                          **overrides)
    else:
        trainer = Trainer(*load_default(), a["task"], a["recipe"], **kw, **overrides)
    summary = {"recipe": trainer.recipe.to_dict(), "task": trainer.task.spec(), "seed": trainer.seed,
               "steps_target": a["steps"], "greedy_pass@1_before": _greedy(trainer, args.eval_n)}
    return trainer, out, summary, a["steps"], held


# --- the run ------------------------------------------------------------------------------------------
def train(args, overrides: dict) -> int:
    if args.resume:
        check_resume_flags(args, overrides)
        check_resume_dir(args.resume)
        with run_lock(args.resume, "--resume"):  # before loading: the holder may be saving right now
            trainer, out, summary, target = _resume(args)
            return _train(args, trainer, out, summary, target, [])
    trainer, out, summary, target, held = _new(args, overrides)
    with run_lock(out, "--out"):
        if held_run(out) != held:  # another run wrote here while this one was being built
            raise ValueError(f"--out: {out} now holds another run ({', '.join(held_run(out))}); continue it with "
                             f"--resume {out}, or replace it with --overwrite")
        return _train(args, trainer, out, summary, target, held)


def _train(args, trainer, out: Path, summary: dict, target: int, held: list[str]) -> int:
    stop = StopRequest()
    with stop.installed():  # from the first file written on, Ctrl-C cannot leave the files disagreeing
        with stop.shield():
            _start_files(trainer, out, summary, replace=held)
        callbacks = [JsonlWriter(out / "metrics.jsonl", already=len(trainer.history)),
                     Checkpointer(out / "checkpoint", args.save_every), stop]
        t0 = time.time()
        try:
            if not stop.count:
                trainer.run(target - trainer.step_count, callbacks=callbacks, progress=not args.no_progress)
        finally:
            with stop.shield():
                summary = _finish(trainer, out, summary, target, time.time() - t0, interrupted=bool(stop.count),
                                  report=bool(stop.count) or trainer.step_count < target or not args.eval_n)
    finished = trainer.step_count >= target and not stop.count
    if finished and args.eval_n:  # Ctrl-C here exits 130 with the files already in agreement
        try:
            summary["greedy_pass@1_after"] = _greedy(trainer, args.eval_n)
            _atomic_write(out / "summary.json", json.dumps(summary, indent=1))
        finally:
            _report(trainer, out, summary)
    print(json.dumps({k: v for k, v in summary.items() if k not in ("recipe", "task")}, indent=1))
    print(f"wrote {out}/metrics.jsonl, {out}/checkpoint, {out}/report.html")
    return 0 if finished else 130


def _start_files(trainer, out: Path, summary: dict, replace: list[str]) -> None:
    """A new run's empty metrics and its summary (the measured pass@1 before training), or, on resume,
    metrics rewritten from the checkpoint: it is the truth (metrics.jsonl may hold steps written after it,
    or half a line)."""
    out.mkdir(parents=True, exist_ok=True)
    for name in replace:  # --overwrite: only the old run's own files go
        path = out / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    _atomic_write(out / "metrics.jsonl", "".join(json.dumps(h) + "\n" for h in trainer.history))
    summary["steps"] = trainer.step_count
    _atomic_write(out / "summary.json", json.dumps(summary, indent=1))


def _finish(trainer, out: Path, summary: dict, target: int, wall_s: float, interrupted: bool, report: bool) -> dict:
    """Metrics, checkpoint and summary of the steps done, in that order, each written whole."""
    _atomic_write(out / "metrics.jsonl", "".join(json.dumps(h) + "\n" for h in trainer.history))
    trainer.save(out / "checkpoint")
    summary = {**summary, "steps": trainer.step_count, "steps_target": target,
               "interrupted": interrupted or trainer.step_count < target,
               "wall_s_this_invocation": round(wall_s, 1)}
    if trainer.history:
        summary["mean_time_per_stage_s"] = {k: round(sum(h[k] for h in trainer.history) / len(trainer.history), 3)
                                            for k in trainer.history[-1] if k.startswith("timing/")}
    _atomic_write(out / "summary.json", json.dumps(summary, indent=1))
    if report:  # otherwise written after the final evaluation
        _report(trainer, out, summary)
    return summary


def _report(trainer, out: Path, summary: dict) -> None:
    from rlnb.cli.report import changed_settings, write_report

    tmp = out / "report.html.tmp"
    model = Path(str(getattr(trainer.model.config, "_name_or_path", "") or "")).name or "the default model"
    title = f"{trainer.recipe.name} on {trainer.task.name} · {model} · {trainer.step_count} steps"
    write_report(trainer.history, tmp, title=title, changed=changed_settings(trainer.recipe),
                 summary={k: v for k, v in summary.items() if k not in ("recipe", "task")})
    os.replace(tmp, out / "report.html")
