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
names the one that is missing, truncated or corrupt. Recipe changes given to ``load`` go through
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
from rlnb.core.runtime import deferred_interrupt, hash_seed
from rlnb.models import load as load_model
from rlnb.models.pretrained import AdaptersOff, enable_autocast, enable_checkpointing
from rlnb.models.tiny import quiet_progress
from rlnb.recipe import Recipe
from rlnb.run.checkpoint_checks import check_history_line, check_meta, check_state, pinned, resolved_knobs
from rlnb.run.state import RunState

FORMAT = 2
CONSTRUCTOR_ARGS = ("pool_size", "keep_records", "safe_update", "reward_on_error", "reward_time_limit")
LOAD_OPTIONS = ("keep_records", "safe_update", "reward_on_error", "reward_time_limit")  # change no number of a run that has no error


def as_path(arg: str, value) -> Path:
    if isinstance(value, bool) or not isinstance(value, (str, os.PathLike)) or not str(value):
        raise TypeError(f"{arg}: expected a folder path (str or Path), got {short(value)}")
    return Path(value).expanduser()


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
def find(directory) -> Path:
    """The checkpoint folder to read: ``directory``, or ``<dir>.old`` when a save was killed between renames."""
    directory = as_path("directory", directory)
    old = directory.with_name(directory.name + ".old")
    if not (directory / "trainer.json").exists() and (old / "trainer.json").is_file():
        return old  # a save was killed between its two renames: the previous checkpoint is whole
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"directory: {directory} is a file, expected an rlnb checkpoint folder")
    if not (directory / "trainer.json").is_file():
        raise FileNotFoundError(f"directory: no rlnb checkpoint (trainer.json) in {directory}")
    return directory


def read_meta(directory: Path) -> dict:
    path = directory / "trainer.json"
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"directory: {path} is not valid JSON ({e}); the checkpoint is truncated or corrupt") from None
    if not isinstance(meta, dict):
        raise ValueError(f"directory: {path} holds {type(meta).__name__}, expected an object; the checkpoint is corrupt")
    if "format" not in meta:  # format 1 (before the whole run was kept): a task name, no arguments
        meta = {**meta, "format": 1, "task": {"name": meta.get("task"), "params": {}}, "args": {}, "model": {}}
    for key, kind in (("recipe", dict), ("task", dict), ("seed", int), ("step_count", int), ("prompts_drawn", int),
                      ("args", dict), ("model", dict), ("controllers", list)):
        if not isinstance(meta.get(key), kind) or isinstance(meta.get(key), bool):
            raise ValueError(f"directory: {path} has {key}={short(meta.get(key))}, expected a {kind.__name__}; "
                             "the checkpoint is corrupt")
    if meta["format"] > FORMAT:
        raise ValueError(f"directory: {path} was written by a newer rlnb (format {meta['format']} > {FORMAT})")
    check_meta(meta, path)
    return meta


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
    dtype = _dtype(meta["model"].get("dtype", "float32"), directory)
    model, tokenizer = _model(directory / "model", dtype, dev)
    options = _model_options(model, meta["model"].get("options") or {}, directory)
    the_task = _task(meta["task"], task, tokenizer, tasks_mod)
    ref = _reference(directory, meta, dtype, dev)
    trainer = cls(model, tokenizer, the_task, _recipe(meta["recipe"], directory), seed=meta["seed"], ref_model=ref,
                  **args)
    if options:
        trainer.model_options = options
    if "pool_digest" in meta and pool_digest(trainer.pool) != meta["pool_digest"]:
        raise ValueError(f"task: the training prompts of {meta['task']} differ from the saved run's (its data "
                         "source changed?); the run cannot continue exactly")
    _restore(trainer, directory, meta, same_device=dev.type == torch.device(saved_device).type)
    changes.update(pinned(meta, trainer.recipe, changes))
    if changes:  # the recipe, the optimizer's param groups and the schedule change together
        trainer.reconfigure(**changes)
    return trainer


def _recipe(fields: dict, directory: Path):
    unknown = sorted(set(fields) - set(Recipe.field_docs()))
    if unknown:
        raise ValueError(f"directory: {directory / 'trainer.json'} has recipe fields this rlnb does not know: "
                         f"{unknown}")
    return Recipe(**fields)  # checked like any recipe: a bad saved value is named


def _dtype(name, directory: Path) -> torch.dtype:
    dtype = getattr(torch, str(name), None)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"directory: {directory / 'trainer.json'} names the model dtype {short(name)}; corrupt")
    return dtype


def _model(path: Path, dtype, device):
    if (path / "adapter_config.json").exists():
        raise ValueError(f"directory: {path} holds LoRA adapters; Trainer.load cannot rebuild a LoRA trainer "
                         "(load the base model with Trainer.from_pretrained and the adapters with peft)")
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"directory: the checkpoint has no model ({path / 'config.json'} is missing)")
    try:
        return load_model(path, dtype=dtype, device=str(device))
    except Exception as e:  # safetensors, JSON and tokenizer errors have no common base class
        raise ValueError(f"directory: cannot read the model in {path} ({_first_line(e)}); the checkpoint is "
                         "truncated or corrupt") from e


def _model_options(model, options: dict, directory: Path) -> dict:
    """Re-apply ``Trainer.from_pretrained``'s gradient checkpointing and autocast to the loaded model."""
    if options.get("gradient_checkpointing"):
        model.config.use_cache = False
        enable_checkpointing(model)
    if options.get("autocast"):
        dtype = getattr(torch, str(options["autocast"]), None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"directory: {directory / 'trainer.json'} names the autocast dtype {options['autocast']!r}")
        enable_autocast(model, dtype)
    return options


def _task(spec: dict, given, tokenizer, tasks_mod):
    if given is None:
        return tasks_mod.from_spec(spec, tokenizer=tokenizer)
    given = tasks_mod.get(given)
    same = given.spec() == spec or (spec.get("params") is None and given.name == spec.get("name"))
    if not same:
        raise ValueError(f"task: the saved run is on {spec}, got {given.spec()}; Trainer.load does not change "
                         "a run's task")
    return given


def _reference(directory: Path, meta: dict, dtype, device):
    path = directory / "reference"
    if not meta["model"].get("reference", path.exists()):
        return None
    from transformers import AutoModelForCausalLM  # weights only: the tokenizer lives in model/

    try:
        with quiet_progress():
            ref = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, use_safetensors=True)
    except Exception as e:
        raise ValueError(f"directory: cannot read the reference model in {path} ({_first_line(e)}); the "
                         "checkpoint is truncated or corrupt") from e
    return ref.to(device).eval().requires_grad_(False)


def _restore(t, directory: Path, meta: dict, same_device: bool) -> None:
    """Read and check every file first, then set: a checkpoint that fails a check changes nothing."""
    path = directory / "state.pt"
    try:
        state = torch.load(path, weights_only=True, map_location="cpu")
    except FileNotFoundError:
        raise FileNotFoundError(f"directory: the checkpoint has no {path}") from None
    except Exception as e:  # torch's truncated-zip and unpickling errors differ by version
        raise ValueError(f"directory: cannot read {path} ({_first_line(e)}); the checkpoint is truncated or "
                         "corrupt") from e
    check_state(state, path, t.generators, same_device)
    history = read_history(directory / "history.jsonl", meta["step_count"])
    start = _start_weights(directory, t.state().start_weights)
    try:
        t.optimizer.load_state_dict(state["optimizer"])
        t.scheduler.load_state_dict(state["scheduler"])
        if state.get("value_head") is not None:
            t.value_head.load_state_dict(state["value_head"])
    except Exception as e:  # state-dict errors differ by version
        raise ValueError(f"directory: cannot read {path} ({_first_line(e)}); the checkpoint is truncated or "
                         "corrupt") from e
    t.set_state(RunState(
        step=meta["step_count"], prompts_drawn=meta["prompts_drawn"], run_target=meta.get("run_target"),
        rng=_streams(t, state["rng"], meta, same_device), pass_rates=meta.get("pass_rates"),
        controllers=meta["controllers"], reward_errors=meta.get("reward_errors", 0),
        task_state=meta.get("task_state"), logged_knobs=tuple(meta.get("logged_knobs", ())),
        training=meta["model"].get("training", False), history=history, start_weights=start))


def _streams(t, saved: dict, meta: dict, same_device: bool) -> dict:
    """The trainer's random streams from ``saved`` (checked whole by ``check_state``)."""
    rng = {}
    for name, gen in t.generators.items():
        if same_device or gen.device.type == "cpu":
            rng[name] = saved[name]
        else:  # another device's stream cannot be carried over: a fresh one (the run is no longer bit-exact)
            fresh = torch.Generator(device=gen.device)
            rng[name] = fresh.manual_seed(hash_seed(t.seed, f"{name}@{meta['step_count']}")).get_state()
    return rng


def _start_weights(directory: Path, default):
    start = directory / "start.safetensors"
    if not start.exists():
        return default
    from safetensors.torch import load_file

    try:
        return load_file(start)
    except Exception as e:
        raise ValueError(f"directory: cannot read {start} ({_first_line(e)}); the checkpoint is corrupt") from e


def read_history(path: Path, steps: int) -> list[dict]:
    if not path.is_file():
        raise FileNotFoundError(f"directory: the checkpoint has no {path}")
    history = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"directory: {path} line {i} is not valid JSON ({e.msg}); the checkpoint is "
                             "truncated or corrupt") from None
        history.append(check_history_line(entry, path, i))
    if len(history) != steps:
        raise ValueError(f"directory: {path} holds {len(history)} steps, trainer.json says {steps}; the "
                         "checkpoint is corrupt")
    return history


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:200]}" if text else type(e).__name__
