"""A checkpoint is checked whole before any of it is set: each error names the file and the field.

A value of the wrong kind would otherwise load and fail steps later (a string ``run_target``), or train
silently on other prompts (a negative prompt cursor), or continue as another run (``state.pt`` without its
random streams starts fresh ones). ``read_meta`` calls ``check_meta``; ``restore_run`` calls ``check_state`` and
``check_history_line`` before it sets anything on the trainer (both in ``rlnb.run.checkpoint_read``).
"""

from __future__ import annotations

from pathlib import Path

import torch

from rlnb.core.checks import short
from rlnb.core.knobs import UNSET
from rlnb.recipe import Recipe


def _bad(path: Path, field: str, value, expected: str) -> ValueError:
    return ValueError(f"directory: {path} has {field}={short(value)}, expected {expected}; the checkpoint is "
                      "corrupt")


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def check_meta(meta: dict, path: Path) -> None:
    """trainer.json's run fields (``read_meta`` has checked their JSON kinds): ranges and names."""
    for key in ("step_count", "prompts_drawn", "reward_errors"):
        if key in meta and not _count(meta[key]):
            raise _bad(path, key, meta[key], "an int >= 0")
    target = meta.get("run_target")
    if target is not None and not _count(target):
        raise _bad(path, "run_target", target, "None or an int >= 0 (the step an interrupted run finishes at)")
    knobs = meta.get("logged_knobs", [])
    if not isinstance(knobs, list) or not all(isinstance(k, str) for k in knobs):
        raise _bad(path, "logged_knobs", knobs, "a list of Recipe knob names")
    unknown = [k for k in knobs if k not in Recipe.knobs()]
    if unknown:
        raise _bad(path, "logged_knobs", unknown, "Recipe knob names (this rlnb does not know these)")
    resolved = meta.get("resolved", {})
    if not isinstance(resolved, dict) or any(k not in Recipe.knobs() for k in resolved):
        raise _bad(path, "resolved", resolved, "an object Recipe knob -> the value it ran with")
    training = meta["model"].get("training", False)
    if not isinstance(training, bool):
        raise _bad(path, "model.training", training, "true or false (the model's train/eval mode)")


def check_state(state, path: Path, generators: dict, same_device: bool) -> None:
    """state.pt: optimizer, scheduler, value head and one whole random stream per generator of the trainer."""
    if not isinstance(state, dict):
        raise ValueError(f"directory: {path} holds {type(state).__name__}, expected a dict; the checkpoint is corrupt")
    for key in ("optimizer", "scheduler"):
        if not isinstance(state.get(key), dict):
            raise _bad(path, key, state.get(key), "a state dict")
    rng = state.get("rng")
    if not isinstance(rng, dict):  # fresh streams would make another run, silently
        raise _bad(path, "rng", rng, f"the random streams {sorted(generators)}; without them the run cannot "
                                     "continue exactly")
    missing = sorted(set(generators) - set(rng))
    if missing:
        raise _bad(path, "rng", sorted(rng), f"every random stream {sorted(generators)} (missing {missing}); "
                                             "without them the run cannot continue exactly")
    for name, gen in generators.items():
        if not same_device and gen.device.type != "cpu":
            continue  # replaced by a fresh stream at load (another device's state cannot be carried over)
        size = gen.get_state().numel()
        s = rng[name]
        if not isinstance(s, torch.Tensor) or s.dtype != torch.uint8 or s.numel() != size:
            got = f"{s.numel()} {s.dtype} values" if isinstance(s, torch.Tensor) else short(s)
            raise ValueError(f"directory: {path} has rng[{name!r}] of {got}, expected a whole random stream "
                             f"({size} uint8 values); it is cut short or corrupt")


def check_history_line(entry, path: Path, line: int) -> dict:
    """One line of history.jsonl: a JSON object of metrics."""
    if not isinstance(entry, dict):
        raise ValueError(f"directory: {path} line {line} holds {type(entry).__name__} {short(entry)}, expected a "
                         "JSON object of metrics; the checkpoint is corrupt")
    return entry


# --- what the knobs a recipe leaves unset resolved to ------------------------------------------------
def resolved_knobs(recipe) -> dict:
    """``{knob: value}`` of every entry knob ``recipe`` leaves UNSET, as the chosen entries resolve it now
    (JSON scalars only): saved, so a newer rlnb whose entry default changed continues with the saved value."""
    out = {}
    for stage in recipe.hyperparameters().values():
        for name, value in stage.items():
            if getattr(recipe, name, None) is UNSET and (value is None or isinstance(value, (bool, int, float, str))):
                out[name] = value
    return out


def pinned(meta: dict, recipe, changes: dict) -> dict:
    """The saved resolved values that this rlnb would resolve differently (and that ``changes`` do not set):
    applied at load with the other knob changes, so the run continues with the values it ran with."""
    now = resolved_knobs(recipe)
    return {k: v for k, v in meta.get("resolved", {}).items() if k not in changes and k in now and now[k] != v}
