"""Exact resume for any trainer: for every recipe x task x non-default constructor argument, ``run(2)``
equals ``run(1)`` + save + load + ``run(1)`` bit for bit (history without timing, weights, optimizer,
every random stream, the task's own noise stream, prompt cursor, controllers, pass rates)."""

import copy
import hashlib
import shutil

import pytest
import torch

import rlnb
from rlnb import tasks
from rlnb.tasks.gsm8k import SAMPLE

SMALL = dict(prompts_per_step=2, num_generations=2, max_new_tokens=8)
# every constructor argument away from its default at once, so each grid cell exercises all of them
NON_DEFAULT = dict(seed=5, pool_size=16, keep_records=2, safe_update=False, reward_on_error="zero")


@pytest.fixture(scope="module")
def gsm8k_file(tmp_path_factory):
    """A gsm8k source that is not the shipped sample (a copy under another name, rows reversed)."""
    path = tmp_path_factory.mktemp("data") / "mine.jsonl"
    path.write_text("\n".join(reversed(SAMPLE.read_text().splitlines())) + "\n")
    return path


def make_task(name, gsm8k_file):
    """A fresh task with parameters off their defaults (a fresh one each time: a noisy task's stream is state)."""
    return {
        "add": lambda: tasks.get("add", digits=2, p_scratch=0.25),
        "countdown": lambda: tasks.get("countdown", max_number=9, max_target=50),
        "gsm8k": lambda: tasks.get("gsm8k", source=gsm8k_file),
        "noisy": lambda: tasks.noisy(tasks.get("add", digits=2), sigma_shared=0.3, sigma_sample=0.2, seed=11),
    }[name]()


def strip(history):
    return [{k: v for k, v in h.items() if not k.startswith("timing/")} for h in history]


def digest(x):
    if isinstance(x, torch.Tensor):
        data = x.detach().cpu().contiguous()
        return (tuple(data.shape), str(data.dtype), hashlib.sha256(memoryview(data.numpy()).cast("B")).hexdigest())
    if isinstance(x, dict):
        return {k: digest(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [digest(v) for v in x]
    return x


def state(t) -> dict:
    """Everything that decides the next steps."""
    return digest({"params": list(t.model.parameters()), "optimizer": t.optimizer.state_dict(),
                   "scheduler": t.scheduler.state_dict(), "rng": t.state().rng, "drawn": t.prompts_drawn,
                   "steps": t.step_count, "task": t.task.state(), "controllers": [c.state() for c in t.controllers],
                   "pass_rates": None if t.pass_rates is None else t.pass_rates.state_dict(),
                   "value_head": None if t.value_head is None else t.value_head.state_dict(),
                   "history": strip(t.history), "errors": t.rewarder.errors, "training": t.model.training})


def trainer(default_model, recipe, task, args, model_fn=None):
    model, tok = default_model
    model = copy.deepcopy(model)
    if model_fn:
        model_fn(model)
    return rlnb.Trainer(model, tok, task, recipe, **SMALL, **args)


def check_resume(default_model, tmp_path, recipe, make, args, model_fn=None):
    """``first`` runs 1 step, saves, runs 1 more: that is ``run(2)`` (saving changes nothing, see
    test_saving_does_not_change_the_run), and the trainer loaded from the save must match it after 1 step."""
    first = trainer(default_model, recipe, make(), args, model_fn)
    first.run(1, progress=False)
    first.save(tmp_path / "ck")
    second = rlnb.Trainer.load(tmp_path / "ck")
    whole = first
    whole.run(1, progress=False)
    for key in ("pool_size", "safe_update", "reward_on_error", "seed"):       # the constructor arguments came back
        assert getattr(second, key) == getattr(first, key), key
    assert second.records.maxlen == first.records.maxlen and second.task.spec() == first.task.spec()
    assert second.recipe == first.recipe
    second.run(1, progress=False)
    assert strip(second.history) == strip(whole.history)
    assert state(second) == state(whole)
    shutil.rmtree(tmp_path / "ck")
    return whole


GRID = [(r, t) for r in rlnb.recipes.names() for t in ("add", "countdown", "gsm8k", "noisy")]


@pytest.mark.parametrize("recipe, task", GRID, ids=[f"{r}-{t}" for r, t in GRID])
def test_resume_is_exact_for_every_recipe_task_and_argument(default_model, gsm8k_file, tmp_path, recipe, task):
    make = lambda: make_task(task, gsm8k_file)  # noqa: E731
    if recipe == "maxrl" and task == "noisy":  # Gaussian noise makes rewards negative: MaxRL refuses them
        t = trainer(default_model, recipe, make(), NON_DEFAULT)
        before = state(t)
        with pytest.raises(ValueError, match="^rewards: MaxRL"):
            t.step()
        assert state(t) == before
        return
    whole = check_resume(default_model, tmp_path, recipe, make, NON_DEFAULT)
    assert whole.step_count == 2


@pytest.mark.parametrize("recipe", rlnb.recipes.names())
def test_resume_is_exact_with_default_arguments(default_model, tmp_path, recipe):
    check_resume(default_model, tmp_path, recipe, lambda: "add", {})


ONE_ARG = [dict(pool_size=3), dict(keep_records=1), dict(safe_update=False), dict(reward_on_error="zero"),
           dict(seed=123456789012)]


@pytest.mark.parametrize("args", ONE_ARG, ids=[next(iter(a)) for a in ONE_ARG])
def test_resume_is_exact_with_each_argument_alone(default_model, tmp_path, args):
    check_resume(default_model, tmp_path, "grpo", lambda: "countdown", args)


RECIPE_FEATURES = {
    "adaptive beta": ("grpo", dict(beta=0.02, kl_target=0.01)),
    "adaptive beta in the reward": ("rloo", dict(kl_target=0.01)),
    "entropy thermostat": ("grpo", dict(entropy_target=0.5, entropy_coef=0.01)),
    "no-positive-resampling": ("grpo", dict(pass_rate_threshold=0.5)),
    "top-K log-probs": ("dppo", dict(loss="dppo_topk_tv", topk_logprobs=2)),
    "epochs and mini-batches": ("grpo", dict(num_iterations=2, num_mini_batches=2, weight_decay=0.1)),
}


@pytest.mark.parametrize("name", RECIPE_FEATURES)
def test_resume_is_exact_with_stateful_recipe_features(default_model, tmp_path, name):
    recipe, fields = RECIPE_FEATURES[name]
    check_resume(default_model, tmp_path, rlnb.recipes.get(recipe, **fields), lambda: "add", NON_DEFAULT)


def with_dropout(model):
    model.config.attention_dropout = 0.3  # saved with the weights
    for module in model.modules():
        if hasattr(module, "attention_dropout"):
            module.attention_dropout = 0.3


def test_dropout_draws_from_the_trainers_own_stream(default_model, tmp_path):
    """Dropout uses torch's global generator; a step runs it on the trainer's "dropout" stream, so resume is
    exact and the caller's global random state is untouched."""
    whole = check_resume(default_model, tmp_path, "grpo", lambda: "add", {}, model_fn=with_dropout)
    plain = trainer(default_model, "grpo", "add", {})
    plain.run(2, progress=False)
    assert strip(whole.history) != strip(plain.history)             # dropout really changed the numbers
    from rlnb.core.runtime import uses_dropout

    assert uses_dropout(whole.model) and not uses_dropout(plain.model)  # only a dropout model borrows the stream
    for t in (whole, plain):
        torch.manual_seed(0)
        before = torch.get_rng_state()
        t.step()
        assert torch.equal(torch.get_rng_state(), before)


def test_a_failed_step_does_not_advance_the_noise_stream(default_model):
    """The noisy task's generator is part of the step's rollback: a step that fails after the reward
    consumed noise leaves it where it was, and the next step equals an untouched twin's."""
    make = lambda: tasks.noisy("add", sigma_sample=1.0, seed=3)  # noqa: E731
    t, twin = trainer(default_model, "grpo", make(), {}), trainer(default_model, "grpo", make(), {})

    class Fail:
        def on_stage(self, trainer, stage, batch):
            if stage == "reward":
                raise RuntimeError("simulated")

    before = t.task.state()
    with pytest.raises(RuntimeError):
        t.step(callbacks=[Fail()])
    assert t.task.state() == before
    assert strip([t.step().metrics]) == strip([twin.step().metrics])
    assert t.task.state() == twin.task.state() != before


@pytest.mark.parametrize("recipe, task", [("ppo", "noisy"), ("dapo", "countdown"), ("scalerl", "gsm8k")])
def test_saving_does_not_change_the_run(default_model, gsm8k_file, tmp_path, recipe, task):
    """run(1) + save + run(1) on the same trainer equals run(2) of one that never saved."""
    t = trainer(default_model, recipe, make_task(task, gsm8k_file), NON_DEFAULT)
    plain = trainer(default_model, recipe, make_task(task, gsm8k_file), NON_DEFAULT)
    t.run(1, progress=False)
    t.save(tmp_path / "ck")
    t.run(1, progress=False)
    plain.run(2, progress=False)
    assert state(t) == state(plain)
