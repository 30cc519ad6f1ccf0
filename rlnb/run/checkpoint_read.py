"""Reading a checkpoint back: every file checked, and named when it is missing, truncated or corrupt.

``find`` picks the folder (``<dir>.old`` after a save killed between its renames), ``read_meta`` reads
``trainer.json``; ``read_recipe``, ``read_dtype``, ``read_model`` (with ``apply_model_options``), ``read_task`` and
``read_reference`` rebuild what the Trainer is constructed from; ``restore_run`` reads ``state.pt``, the history
and the starting weights, checks them whole (``rlnb.run.checkpoint_checks``) and only then sets the run through
``Trainer.set_state``. ``rlnb.run.checkpoint`` writes the files and puts these together in ``load``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from rlnb.core.checks import short
from rlnb.core.runtime import hash_seed
from rlnb.models import load as load_model
from rlnb.models.pretrained import enable_autocast, enable_checkpointing
from rlnb.models.tiny import quiet_progress
from rlnb.recipe import Recipe
from rlnb.run.checkpoint_checks import check_history_line, check_meta, check_state
from rlnb.run.state import RunState

FORMAT = 2  # the newest checkpoint format: this rlnb writes it and reads it and every older one

def as_path(arg: str, value) -> Path:
    if isinstance(value, bool) or not isinstance(value, (str, os.PathLike)) or not str(value):
        raise TypeError(f"{arg}: expected a folder path (str or Path), got {short(value)}")
    return Path(value).expanduser()


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


def read_recipe(fields: dict, directory: Path):
    unknown = sorted(set(fields) - set(Recipe.field_docs()))
    if unknown:
        raise ValueError(f"directory: {directory / 'trainer.json'} has recipe fields this rlnb does not know: "
                         f"{unknown}")
    return Recipe(**fields)  # checked like any recipe: a bad saved value is named


def read_dtype(name, directory: Path) -> torch.dtype:
    dtype = getattr(torch, str(name), None)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"directory: {directory / 'trainer.json'} names the model dtype {short(name)}; corrupt")
    return dtype


def read_model(path: Path, dtype, device):
    if (path / "adapter_config.json").exists():
        raise ValueError(f"directory: {path} holds LoRA adapters; Trainer.load cannot rebuild a LoRA trainer "
                         "(load the base model with Trainer.from_pretrained and the adapters with peft)")
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"directory: the checkpoint has no model ({path / 'config.json'} is missing)")
    try:
        return load_model(path, dtype=dtype, device=str(device))
    except Exception as e:  # safetensors, JSON and tokenizer errors have no common base class
        raise ValueError(f"directory: cannot read the model in {path} ({first_line(e)}); the checkpoint is "
                         "truncated or corrupt") from e


def apply_model_options(model, options: dict, directory: Path) -> dict:
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


def read_task(spec: dict, given, tokenizer, tasks_mod):
    if given is None:
        return tasks_mod.from_spec(spec, tokenizer=tokenizer)
    given = tasks_mod.get(given)
    same = given.spec() == spec or (spec.get("params") is None and given.name == spec.get("name"))
    if not same:
        raise ValueError(f"task: the saved run is on {spec}, got {given.spec()}; Trainer.load does not change "
                         "a run's task")
    return given


def read_reference(directory: Path, meta: dict, dtype, device):
    path = directory / "reference"
    if not meta["model"].get("reference", path.exists()):
        return None
    from transformers import AutoModelForCausalLM  # weights only: the tokenizer lives in model/

    try:
        with quiet_progress():
            ref = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, use_safetensors=True)
    except Exception as e:
        raise ValueError(f"directory: cannot read the reference model in {path} ({first_line(e)}); the "
                         "checkpoint is truncated or corrupt") from e
    return ref.to(device).eval().requires_grad_(False)


def restore_run(t, directory: Path, meta: dict, same_device: bool) -> None:
    """Read and check every file first, then set: a checkpoint that fails a check changes nothing."""
    path = directory / "state.pt"
    try:
        state = torch.load(path, weights_only=True, map_location="cpu")
    except FileNotFoundError:
        raise FileNotFoundError(f"directory: the checkpoint has no {path}") from None
    except Exception as e:  # torch's truncated-zip and unpickling errors differ by version
        raise ValueError(f"directory: cannot read {path} ({first_line(e)}); the checkpoint is truncated or "
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
        raise ValueError(f"directory: cannot read {path} ({first_line(e)}); the checkpoint is truncated or "
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
        raise ValueError(f"directory: cannot read {start} ({first_line(e)}); the checkpoint is corrupt") from e


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


def first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:200]}" if text else type(e).__name__
