"""``Trainer.load`` options and ``Trainer.save`` targets: a knob changed at load applies like
``reconfigure`` at that step (recipe, optimizer param groups and schedule together); what would make it
another run is refused by name; a reconfigured run resumes exactly; save never replaces what is not a
checkpoint."""

import pytest
import torch

import rlnb
from rlnb.tasks import Task
from tests.test_resume_grid import SMALL, state, strip, trainer


@pytest.fixture
def saved(default_model, tmp_path):
    t = trainer(default_model, "grpo", "add", {"pool_size": 16})
    t.run(1, progress=False)
    t.save(tmp_path / "ck")
    return t, tmp_path / "ck"


def test_a_knob_changed_at_load_equals_reconfigure_at_that_step(default_model, saved):
    t, ck = saved
    changes = dict(lr=1e-2, warmup_steps=0, weight_decay=0.05, temperature=0.7, eps_high=0.3)
    loaded = rlnb.Trainer.load(ck, **changes)
    t.reconfigure(**changes)
    for a, b in ((t, loaded),):
        assert b.recipe == a.recipe
        assert b.optimizer.state_dict()["param_groups"] == a.optimizer.state_dict()["param_groups"]
        assert b.scheduler.base_lrs == a.scheduler.base_lrs == [1e-2]
    assert loaded.optimizer.param_groups[0]["lr"] == 1e-2 and loaded.optimizer.param_groups[0]["weight_decay"] == 0.05
    t.run(1, progress=False)
    loaded.run(1, progress=False)
    assert state(loaded) == state(t)


def test_a_reconfigured_run_resumes_exactly(default_model, tmp_path):
    """beta turned on mid-run (the reference is the start weights), a logged knob, a new lr: all saved."""
    t = trainer(default_model, "grpo", "add", {"pool_size": 16})
    t.run(1, progress=False)
    t.reconfigure(beta=0.05, lr=3e-4)
    t.logged_knobs = ("beta", "lr")
    t.run(1, progress=False)
    t.save(tmp_path / "ck")
    loaded = rlnb.Trainer.load(tmp_path / "ck")
    assert loaded.logged_knobs == ("beta", "lr") and loaded.recipe == t.recipe
    assert all(torch.equal(a, b) for a, b in zip(loaded.ref_model.parameters(), t.ref_model.parameters()))
    t.run(1, progress=False)
    loaded.run(1, progress=False)
    assert state(loaded) == state(t) and loaded.history[-1]["hp/beta"] == 0.05


def test_start_weights_survive_a_save_for_a_later_beta(default_model, tmp_path):
    """A run saved before beta was ever on keeps the weights it started from: reconfigure(beta=...)
    after load uses them as the reference, exactly as without the save."""
    t = trainer(default_model, "grpo", "add", {"pool_size": 16, "weight_decay": 0.1})  # the weights move
    t.run(1, progress=False)
    t.save(tmp_path / "ck")
    loaded = rlnb.Trainer.load(tmp_path / "ck")
    for x in (t, loaded):
        x.reconfigure(beta=0.1)
    assert all(torch.equal(a, b) for a, b in zip(loaded.ref_model.parameters(), t.ref_model.parameters()))
    assert not all(torch.equal(a, b) for a, b in zip(loaded.ref_model.parameters(), loaded.model.parameters()))
    t.run(1, progress=False)
    loaded.run(1, progress=False)
    assert state(loaded) == state(t)


REFUSED = [
    (dict(seed=99), ValueError, "seed: Trainer.load continues the saved run, which has seed=0"),
    (dict(pool_size=3), ValueError, "pool_size: Trainer.load continues"),
    (dict(recipe="dapo"), ValueError, "recipe: Trainer.load restores"),
    (dict(ref_model=object()), ValueError, "ref_model: Trainer.load restores"),
    (dict(task="countdown"), ValueError, "task: the saved run is on"),
    (dict(task=rlnb.tasks.get("add", digits=2)), ValueError, "task: the saved run is on"),
    (dict(critic=True), ValueError, "critic: cannot switch the value head on"),
    (dict(lr=-1.0), ValueError, "lr: expected a number > 0"),
    (dict(lr=float("nan")), ValueError, "lr: expected"),
    (dict(num_generations=10**400), ValueError, "num_generations: expected"),
    (dict(temprature=0.5), TypeError, "temprature: Trainer.load takes"),
    (dict(safe_update="yes"), TypeError, "safe_update: expected True or False"),
    (dict(keep_records=0), ValueError, "keep_records: expected an int"),
    (dict(reward_on_error="skip"), ValueError, "reward_on_error: expected 'raise' or 'zero'"),
    (dict(device="cuda:7"), ValueError, "device: "),
    (dict(device="tpu"), ValueError, "device: "),
    (dict(device=3.5), ValueError, "device: "),
]


@pytest.mark.parametrize("kwargs, error, message", REFUSED, ids=[next(iter(k)) + str(i) for i, (k, *_) in enumerate(REFUSED)])
def test_load_refuses_another_run_by_name(saved, kwargs, error, message):
    t, ck = saved
    files = {p: p.read_bytes() for p in ck.rglob("*") if p.is_file()}
    with pytest.raises(error) as info:
        rlnb.Trainer.load(ck, **kwargs)
    assert str(info.value.args[0]).startswith(message), info.value
    assert {p: p.read_bytes() for p in ck.rglob("*") if p.is_file()} == files   # the checkpoint is untouched


def test_load_accepts_the_saved_values_and_the_run_options(saved):
    t, ck = saved
    loaded = rlnb.Trainer.load(ck, seed=0, pool_size=16, keep_records=3, safe_update=False, reward_on_error="zero",
                               task="add")
    assert loaded.records.maxlen == 3 and loaded.safe_update is False and loaded.rewarder.on_error == "zero"
    assert loaded.pool_size == 16 and loaded.recipe == t.recipe


class Parity(Task):
    """A task the registry does not know: the checkpoint cannot rebuild it, the caller passes it."""

    name = "parity"

    def make_example(self, rng):
        a = rng.randint(0, 9)
        return {"prompt": f"{a}+0=", "answer": str(a), "target": str(a)}

    def extract(self, completion):
        return completion.strip() or None


def test_a_custom_task_is_passed_back_at_load(default_model, tmp_path):
    t = trainer(default_model, "grpo", Parity(), {"pool_size": 8})
    t.run(1, progress=False)
    t.save(tmp_path / "ck")
    with pytest.raises(KeyError, match="task: unknown task 'parity'"):
        rlnb.Trainer.load(tmp_path / "ck")
    loaded = rlnb.Trainer.load(tmp_path / "ck", task=Parity())
    t.run(1, progress=False)
    loaded.run(1, progress=False)
    assert state(loaded) == state(t)


SAVE_REFUSED = [
    ("a file", lambda d: d.write_text("notes"), ValueError, "directory: ", "is a file"),
    ("a folder of other files", lambda d: d.mkdir() or (d / "thesis.tex").write_text("x"), ValueError,
     "directory: ", "holds other files"),
]


@pytest.mark.parametrize("what, make, error, start, part", SAVE_REFUSED, ids=[c[0] for c in SAVE_REFUSED])
def test_save_never_replaces_what_is_not_a_checkpoint(saved, tmp_path, what, make, error, start, part):
    t, _ = saved
    target = tmp_path / "target"
    make(target)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(error) as info:
        t.save(target)
    assert info.value.args[0].startswith(start) and part in info.value.args[0]
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("bad", [None, 3, b"ck", ["ck"], ""])
def test_save_and_load_name_a_directory_that_is_not_a_path(saved, bad):
    t, _ = saved
    for call in (lambda: t.save(bad), lambda: rlnb.Trainer.load(bad)):
        with pytest.raises(TypeError, match="^directory: expected a folder path"):
            call()


def test_an_empty_folder_is_a_fine_save_target_and_a_run_of_zero_steps_resumes(default_model, tmp_path):
    (tmp_path / "empty").mkdir()
    t = rlnb.Trainer(*default_model, "add", "grpo", pool_size=8, **SMALL)
    t.save(tmp_path / "empty")
    loaded = rlnb.Trainer.load(tmp_path / "empty")
    assert loaded.step_count == 0 and strip(loaded.history) == []
    assert strip([loaded.step().metrics]) == strip([t.step().metrics])


@pytest.mark.parametrize("options", [dict(autocast="bf16"), dict(gradient_checkpointing=True)],
                         ids=["autocast", "gradient_checkpointing"])
def test_from_pretrained_options_come_back_at_load(tmp_path, options):
    """A from_pretrained trainer's autocast and gradient checkpointing are part of the run: re-applied by
    load, so the run continues bit for bit (bf16 autocast changes the numbers, so it must come back)."""
    from rlnb.models import DEFAULT_DIR

    make = lambda: rlnb.Trainer.from_pretrained(str(DEFAULT_DIR), "add", "grpo", device="cpu", pool_size=8,  # noqa: E731
                                                weight_decay=0.1, **SMALL, **options)
    t = make()
    t.run(1, progress=False)
    t.save(tmp_path / "ck")
    loaded = rlnb.Trainer.load(tmp_path / "ck")
    assert loaded.model_options == t.model_options and any(v for v in t.model_options.values())
    t.run(1, progress=False)
    loaded.run(1, progress=False)
    assert state(loaded) == state(t)
    if "autocast" in options:  # without it the same step gives other numbers: the option matters
        plain = rlnb.Trainer.load(tmp_path / "ck")
        plain.model_options = {}
        import types
        for m in (plain.model, plain.model.get_decoder()):
            m.forward = types.MethodType(type(m).forward, m)
        plain.run(1, progress=False)
        assert strip(plain.history) != strip(t.history)


def test_a_checkpoint_written_before_the_whole_run_was_kept_still_loads(saved, tmp_path):
    """Format 1 (a task name, no constructor arguments, no model block): loads with the defaults it implies."""
    import json
    import shutil

    t, ck = saved
    old = tmp_path / "old"
    shutil.copytree(ck, old)
    meta = json.loads((old / "trainer.json").read_text())
    for key in ("format", "args", "model", "task_state", "pool_digest", "logged_knobs", "rlnb"):
        meta.pop(key)
    meta["task"] = "add"
    (old / "trainer.json").write_text(json.dumps(meta))
    loaded = rlnb.Trainer.load(old)
    assert loaded.step_count == 1 and loaded.task.name == "add" and loaded.pool_size == 4096  # the old default
    assert loaded.recipe == t.recipe and strip(loaded.history) == strip(t.history)
