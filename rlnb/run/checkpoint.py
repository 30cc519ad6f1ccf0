"""Checkpoints that hold the whole run, so that ``run(a + b)`` equals ``run(a)`` + save + load + ``run(b)``.

A checkpoint folder holds:

* ``model/`` (safetensors weights and the tokenizer), ``reference/`` (the KL reference, when there is one);
* ``state.pt``: optimizer, scheduler, every random stream, the value head (``torch.load(weights_only=True)``);
* ``start.safetensors``: the weights the run started from (small models; the reference if beta is turned
  on later with ``reconfigure``);
* ``trainer.json``: the recipe, the task with its parameters and wrappers (``Task.spec()``) and the state
  of its own random stream, a digest of the training prompts, the seed, every constructor argument
  (``pool_size``, ``keep_records``, ``safe_update``, ``reward_on_error``), the model's dtype and device,
  the prompt cursor, controllers, pass rates and counters, and what the knobs the recipe leaves unset resolved to
  (``resolved``: a newer entry default does not change a loaded run);
* ``history.jsonl``: one line of metrics per step.

``save`` writes into ``<dir>.tmp`` and renames it over ``<dir>`` (the old one kept as ``<dir>.old`` until the
new one is in place), so a kill at any moment leaves one whole checkpoint. ``load`` checks every file and
names the one that is missing, truncated or corrupt (``rlnb.run.checkpoint_read``). Recipe changes given to ``load`` go through
``Trainer.reconfigure`` after the run is restored, so the recipe, the optimizer's param groups and the
schedule agree (``critic`` cannot change).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import torch

from rlnb import tasks as tasks_mod
from rlnb.core import __version__
from rlnb.core.checks import check_device, closest, short
from rlnb.core.runtime import deferred_interrupt
from rlnb.models.pretrained import AdaptersOff
from rlnb.models.tiny import quiet_progress
from rlnb.recipe import Recipe
from rlnb.run.checkpoint_checks import pinned, resolved_knobs
from rlnb.run.checkpoint_read import (
    FORMAT,
    apply_model_options,
    as_path,
    find,
    read_dtype,
    read_meta,
    read_model,
    read_recipe,
    read_reference,
    read_task,
    restore_run,
)
from rlnb.run.state import RunState

CONSTRUCTOR_ARGS = ("pool_size", "keep_records", "safe_update", "reward_on_error", "reward_time_limit")
LOAD_OPTIONS = ("keep_records", "safe_update", "reward_on_error", "reward_time_limit")  # change no number of a run that has no error


def pool_digest(pool) -> str:
    """SHA-256 of the training prompts and answers: a changed data source is noticed at load."""
    columns = getattr(pool, "data", None)  # a datasets.Dataset: read its Arrow columns (row access is slow)
    prompts, answers = ((columns.column("prompt").to_pylist(), columns.column("answer").to_pylist())
                        if columns is not None else (list(pool["prompt"]), list(pool["answer"])))
    text = json.dumps([prompts, [str(a) for a in answers]])
    return hashlib.sha256(text.encode()).hexdigest()


# --- save --------------------------------------------------------------------------------------------
def check_target(directory: Path) -> None:
    """Refuse to replace a file, or a folder that holds something other than an rlnb checkpoint."""
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"directory: {directory} is a file, expected a folder for the checkpoint")
    if directory.is_dir() and not (directory / "trainer.json").exists() and any(directory.iterdir()):
        raise ValueError(f"directory: {directory} holds other files and no rlnb checkpoint; refusing to replace it "
                         "(save into a new or empty folder)")


def save(trainer, directory) -> Path:
    """Write ``trainer`` to ``directory`` atomically (see the module docstring)."""
    directory = as_path("directory", directory)
    if directory.is_symlink():  # write beside the real folder: the renames below must not replace the link
        directory = directory.resolve()
    check_target(directory)
    tmp, old = directory.with_name(directory.name + ".tmp"), directory.with_name(directory.name + ".old")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        _write(trainer, tmp)
    except Exception as e:  # a full disk, a file-size limit, a vanished folder: the last checkpoint stays
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, OSError) or "No space" in str(e) or "too large" in str(e) or "os error" in str(e):
            why = e.strerror if isinstance(e, OSError) and e.strerror else " ".join(str(e).split())[:200]
            raise OSError(f"directory: could not write the checkpoint to {directory} ({why}); the previous "
                          "checkpoint there is intact") from e
        raise
    with deferred_interrupt():  # killed between the renames, load() falls back to <dir>.old
        if directory.exists():  # only then is a leftover <dir>.old stale
            shutil.rmtree(old, ignore_errors=True)
            os.replace(directory, old)
        os.replace(tmp, directory)
    shutil.rmtree(old, ignore_errors=True)
    return directory


def _write(trainer, tmp: Path) -> None:
    """Every file of a checkpoint, into the fresh folder ``tmp``."""
    tmp.mkdir(parents=True)
    reference = trainer.ref_model is not None and _saveable(trainer.ref_model)
    state = trainer.state()
    with quiet_progress():
        trainer.model.save_pretrained(tmp / "model", safe_serialization=True)
        if reference:  # the reference is the starting policy, not the current one
            trainer.ref_model.save_pretrained(tmp / "reference", safe_serialization=True)
    trainer.tokenizer.save_pretrained(tmp / "model")
    if state.start_weights is not None:  # reconfigure(beta=...) later needs the start
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in state.start_weights.items()}, tmp / "start.safetensors")
    torch.save({"optimizer": trainer.optimizer.state_dict(), "scheduler": trainer.scheduler.state_dict(),
                "rng": state.rng,
                "value_head": None if trainer.value_head is None else trainer.value_head.state_dict()}, tmp / "state.pt")
    (tmp / "trainer.json").write_text(json.dumps(_meta(trainer, state, reference), indent=1))
    (tmp / "history.jsonl").write_text("".join(json.dumps(h) + "\n" for h in state.history))


def _saveable(ref_model) -> bool:
    """A LoRA reference is the policy with its adapters off: nothing of its own to save."""
    return not isinstance(ref_model, AdaptersOff)


def _meta(t, state: RunState, reference: bool) -> dict:


    run = state.meta()
    return {
        "format": FORMAT, "rlnb": __version__, "recipe": t.recipe.to_dict(), "task": t.task.spec(),
        "task_state": run["task_state"], "pool_digest": pool_digest(t.pool), "seed": t.seed,
        "args": {"pool_size": t.pool_size, "keep_records": t.records.maxlen, "safe_update": t.safe_update,
                 "reward_on_error": t.reward_on_error, "reward_time_limit": t.reward_time_limit},
        "model": {"dtype": str(t.model.dtype).removeprefix("torch."), "device": str(t.device),
                  "training": run["training"], "reference": reference,
                  "options": getattr(t, "model_options", {})},  # from_pretrained's autocast, checkpointing
        "resolved": resolved_knobs(t.recipe),  # what unset knobs ran with: a newer default must not change a run
        **{k: run[k] for k in ("step_count", "prompts_drawn", "run_target", "reward_errors", "controllers",
                               "pass_rates", "logged_knobs")},
    }


# --- load --------------------------------------------------------------------------------------------
def check_overrides(meta: dict, kwargs: dict) -> dict:
    """The constructor arguments for the loaded trainer: the saved ones, with the options a load may change.
    What would make it another run (seed, pool, ref_model, a whole recipe) is refused by name."""
    saved = {**meta["args"], "seed": meta["seed"]}
    recipe_fields = set(Recipe.field_docs())
    for key, value in kwargs.items():
        if key in LOAD_OPTIONS:
            continue
        if key in recipe_fields:  # applied with reconfigure() once the run is restored
            continue
        if key in ("seed", "pool_size"):
            if key not in saved or value == saved[key]:
                continue
            raise ValueError(f"{key}: Trainer.load continues the saved run, which has {key}={saved[key]!r}; "
                             f"it does not change it to {short(value)}")
        if key in ("recipe", "ref_model"):
            raise ValueError(f"{key}: Trainer.load restores the saved run's {key}; it takes no other")
        raise TypeError(f"{key}: Trainer.load takes task, device, recipe knobs and the options "
                        f"{list(LOAD_OPTIONS)}, got {key}={short(value)}{closest(key, recipe_fields)}")
    args = {k: v for k, v in meta["args"].items() if k in CONSTRUCTOR_ARGS}
    args.update({k: v for k, v in kwargs.items() if k in LOAD_OPTIONS})
    return args


def load(cls, directory, *, task=None, device=None, **kwargs):
    """A trainer that continues exactly where ``save`` left off (see ``Trainer.load``)."""
    directory = find(directory)
    meta = read_meta(directory)
    args = check_overrides(meta, kwargs)
    changes = {k: v for k, v in kwargs.items() if k in Recipe.field_docs()}  # recipe knobs
    saved_device = meta["model"].get("device", "cpu")
    dev = check_device("device", device if device is not None else saved_device)
    dtype = read_dtype(meta["model"].get("dtype", "float32"), directory)
    model, tokenizer = read_model(directory / "model", dtype, dev)
    options = apply_model_options(model, meta["model"].get("options") or {}, directory)
    the_task = read_task(meta["task"], task, tokenizer, tasks_mod)
    ref = read_reference(directory, meta, dtype, dev)
    trainer = cls(model, tokenizer, the_task, read_recipe(meta["recipe"], directory), seed=meta["seed"], ref_model=ref,
                  **args)
    if options:
        trainer.model_options = options
    if "pool_digest" in meta and pool_digest(trainer.pool) != meta["pool_digest"]:
        raise ValueError(f"task: the training prompts of {meta['task']} differ from the saved run's (its data "
                         "source changed?); the run cannot continue exactly")
    restore_run(trainer, directory, meta, same_device=dev.type == torch.device(saved_device).type)
    changes.update(pinned(meta, trainer.recipe, changes))
    if changes:  # the recipe, the optimizer's param groups and the schedule change together
        trainer.reconfigure(**changes)
    return trainer


