"""``RunState`` is the one owner of a run's mutable state: after a step of each kind of recipe, every attribute of
the trainer and its stages that changed is a ``RunState`` field (or a weight, optimizer or scheduler), or one of
the few derived fields listed in ``rlnb.run.state.DERIVED``; and ``set_state(state())`` puts back all of it."""

import collections
import dataclasses

import pytest
import torch

import rlnb
from rlnb.run.state import DERIVED, RunState, restore, snapshot

SMALL = dict(prompts_per_step=2, num_generations=4, max_new_tokens=12)

# RunState field -> the attribute paths it owns (and everything below them)
OWNS = {
    "step": ["step_count"], "prompts_drawn": ["prompts.drawn"], "run_target": ["run_target"],
    "rng": ["generators"], "pass_rates": ["pass_rates"], "controllers": ["controllers"],
    "reward_errors": ["rewarder.errors"], "task_state": ["task"], "logged_knobs": ["logged_knobs"],
    "training": ["model.training"], "history": ["history"], "start_weights": ["_start_weights"],
}
WEIGHTS = ["model", "value_head", "optimizer", "scheduler"]  # not run state: weights and their optimizer
SKIP_TYPES = (torch.nn.Module, torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler)


def fingerprint(obj, path="", out=None, depth=0, seen=None):
    """``{path: comparable value}`` of every attribute below ``obj`` (modules, optimizers and data are leaves
    compared by identity; their contents are the weights). An object reached again by another path (a stage's
    reference to the trainer's generator) is recorded once, under its first path."""
    out = {} if out is None else out
    seen = {} if seen is None else seen
    if not isinstance(obj, (int, float, str, bool, type(None))):
        if id(obj) in seen:
            out[path] = ("alias", seen[id(obj)])
            return out
        seen[id(obj)] = path
    if isinstance(obj, torch.Generator):
        out[path] = obj.get_state().clone()
    elif isinstance(obj, torch.Tensor):
        out[path] = obj.detach().clone()
    elif isinstance(obj, SKIP_TYPES) or type(obj).__module__.split(".")[0] in ("transformers", "tokenizers",
                                                                              "datasets", "functools"):
        out[path] = ("id", id(obj))
        if isinstance(obj, torch.nn.Module):
            out[path + ".training"] = obj.training
    elif isinstance(obj, (int, float, str, bool, type(None))):
        out[path] = obj
    elif isinstance(obj, (list, tuple, collections.deque)) and depth < 6:
        out[path] = ("len", len(obj))
        for i, x in enumerate(list(obj)[:64]):
            fingerprint(x, f"{path}.{i}", out, depth + 1, seen)
    elif isinstance(obj, dict) and depth < 6:
        out[path] = ("keys", tuple(sorted(map(str, obj))))
        for k, x in list(obj.items())[:256]:
            fingerprint(x, f"{path}.{k}", out, depth + 1, seen)
    elif hasattr(obj, "__dict__") and not callable(obj) and depth < 6:
        for k, x in vars(obj).items():
            fingerprint(x, f"{path}.{k}" if path else k, out, depth + 1, seen)
    elif hasattr(obj, "__dict__") and depth < 6 and type(obj).__module__.startswith("rlnb"):
        for k, x in vars(obj).items():  # callable rlnb objects (controllers) hold state too
            fingerprint(x, f"{path}.{k}" if path else k, out, depth + 1, seen)
    else:
        out[path] = ("id", id(obj))
    return out


def same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and bool(
            torch.equal(a, b))
    return a == b


def changed(before: dict, after: dict) -> set[str]:
    return {p for p in before.keys() | after.keys() if p not in before or p not in after or not same(before[p], after[p])}


def allowed(path: str) -> bool:
    owned = [p for paths in OWNS.values() for p in paths] + WEIGHTS
    if any(path == p or path.startswith(p + ".") for p in owned):
        return True
    return any(part in DERIVED for part in path.split("."))


def test_every_field_of_run_state_says_what_it_owns():
    assert set(OWNS) == {f.name for f in dataclasses.fields(RunState)}


def test_the_checker_sees_a_change_nobody_owns():
    t = rlnb.Trainer.tiny("grpo", **SMALL)
    before = fingerprint(t)
    t.rewarder.secret = 1                         # state that is not in RunState
    t.sampler.temperature = 0.5
    assert {p for p in changed(before, fingerprint(t)) if not allowed(p)} == {"rewarder.secret",
                                                                             "sampler.temperature"}


@pytest.mark.parametrize("recipe, extra", [("grpo", {}), ("dapo", {}), ("ppo", {}), ("maxrl", {}),
                                           ("grpo", dict(pass_rate_threshold=0.9, entropy_target=0.5))])
def test_a_step_changes_only_run_state_and_derived_fields(recipe, extra):
    t = rlnb.Trainer.tiny(recipe, seed=1, **SMALL, **extra)
    before = fingerprint(t)
    t.step()
    moved = changed(before, fingerprint(t))
    assert "step_count" in moved and any(p.startswith("generators.") for p in moved)
    assert {p for p in moved if not allowed(p)} == set()


@pytest.mark.parametrize("recipe", ["grpo", "dapo", "ppo", "maxrl"])
def test_set_state_of_the_state_before_a_step_puts_everything_back(recipe):
    t = rlnb.Trainer.tiny(recipe, seed=2, **SMALL)
    t.step()
    snap = snapshot(t, weights=True)
    before = fingerprint(t)
    t.step()
    restore(t, snap)
    moved = {p for p in changed(before, fingerprint(t)) if not any(d in p.split(".") for d in DERIVED)}
    assert moved == set()
    again = t.step().metrics                      # and the step that follows is the same step
    restore(t, snap)
    assert {k: v for k, v in t.step().metrics.items() if not k.startswith("timing/")} == \
        {k: v for k, v in again.items() if not k.startswith("timing/")}


def test_set_state_refuses_anything_else():
    t = rlnb.Trainer.tiny("grpo", **SMALL)
    with pytest.raises(TypeError, match="state: expected a RunState"):
        t.set_state({"step": 3})


def test_a_snapshot_holds_copies_the_step_cannot_reach():
    """The step rollback's snapshot clones every tensor of the weights and the optimizer's state (not
    ``copy.deepcopy``, which cost 3x the time): the structure and values are the live ones, and an update changes
    none of them."""
    from rlnb.run.state import clone_tree
    t = rlnb.Trainer.tiny(task="add", recipe="grpo", seed=0)
    t.step()
    snap = snapshot(t, weights=True)
    live = t.optimizer.state_dict()
    assert snap.optimizer["param_groups"] == live["param_groups"]
    for k, st in live["state"].items():
        for name, v in st.items():
            assert torch.equal(snap.optimizer["state"][k][name], v)
            assert snap.optimizer["state"][k][name].data_ptr() != v.data_ptr()
    before = {k: v.clone() for k, v in snap.weights[0].items()}
    t.step()
    assert all(torch.equal(before[k], v) for k, v in snap.weights[0].items())
    tree = {"a": (torch.ones(2), 3), "b": [torch.zeros(1), {"c": "x"}]}
    copied = clone_tree(tree)
    tree["a"][0].add_(1)
    assert type(copied["a"]) is tuple and copied["a"][1] == 3 and copied["b"][1] == {"c": "x"}
    assert torch.equal(copied["a"][0], torch.ones(2))
