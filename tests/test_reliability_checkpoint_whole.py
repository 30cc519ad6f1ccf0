"""A checkpoint is checked whole before anything is set, each error naming the file and the field; the run
lock never follows a symlink."""

import json
import os
import shutil

import pytest
import torch

from rlnb import Trainer
from rlnb.cli.lock import run_lock


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    t = Trainer.tiny("grpo", prompts_per_step=1, num_generations=2, max_new_tokens=4)
    t.log_knobs("lr")
    t.step()
    return t.save(tmp_path_factory.mktemp("ckpt") / "c")


def edit_meta(d, **changes):
    meta = json.loads((d / "trainer.json").read_text())
    for key, value in changes.items():
        if "." in key:
            outer, inner = key.split(".")
            meta[outer][inner] = value
        else:
            meta[key] = value
    (d / "trainer.json").write_text(json.dumps(meta))


def edit_state(d, fn):
    state = torch.load(d / "state.pt", weights_only=True)
    fn(state)
    torch.save(state, d / "state.pt")


def cut_stream(state):
    state["rng"]["sample"] = state["rng"]["sample"][:100]


CASES = {
    "state.pt without its random streams": (lambda d: edit_state(d, lambda s: s.pop("rng")),
                                            r"state.pt has rng=None, expected the random streams"),
    "state.pt missing one stream": (lambda d: edit_state(d, lambda s: s["rng"].pop("credit")),
                                    r"state.pt has rng=.*missing \['credit'\]"),
    "a cut-short stream": (lambda d: edit_state(d, cut_stream), r"state.pt has rng\['sample'\] of 100 torch.uint8 values, expected a whole"),
    "a negative prompt cursor": (lambda d: edit_meta(d, prompts_drawn=-2), r"trainer.json has prompts_drawn=-2"),
    "a string run_target": (lambda d: edit_meta(d, run_target="5"), r"trainer.json has run_target='5'"),
    "an unknown logged knob": (lambda d: edit_meta(d, logged_knobs=["lr", "warp"]),
                               r"trainer.json has logged_knobs=\['warp'\]"),
    "a non-boolean training flag": (lambda d: edit_meta(d, **{"model.training": "yes"}),
                                    r"trainer.json has model.training='yes'"),
    "a history line that is not an object": (lambda d: (d / "history.jsonl").write_text("[1, 2]\n"),
                                             r"history.jsonl line 1 holds list"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_checkpoint_is_refused_naming_file_and_field(saved, tmp_path, case):
    d = tmp_path / "c"
    shutil.copytree(saved, d)
    damage, message = CASES[case]
    damage(d)
    with pytest.raises(ValueError, match=rf"^directory: .*{message}"):
        Trainer.load(d)


def test_the_undamaged_checkpoint_loads(saved):
    t = Trainer.load(saved)
    assert t.step_count == 1 and t.logged_knobs == ("lr",)


def test_a_symlinked_lock_is_refused_and_its_target_untouched(tmp_path):
    out, victim = tmp_path / "run", tmp_path / "precious.txt"
    out.mkdir()
    victim.write_text("keep me")
    os.symlink(victim, out / ".lock")
    with pytest.raises(ValueError, match=rf"^--out: {out / '.lock'} is a symbolic link \(to {victim}\)"):
        with run_lock(out):
            pass
    assert victim.read_text() == "keep me" and (out / ".lock").is_symlink()


def test_a_lock_that_is_a_folder_is_refused(tmp_path):
    (tmp_path / "run" / ".lock").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"^--resume: .*\.lock is not a regular file"):
        with run_lock(tmp_path / "run", "--resume"):
            pass


def test_a_changed_entry_default_does_not_change_a_resumed_run(tmp_path, monkeypatch):
    from rlnb.algos.advantages import grpo

    t = Trainer.tiny("grpo", prompts_per_step=1, num_generations=2, max_new_tokens=4)
    t.step()
    t.save(tmp_path / "c")
    assert json.loads((tmp_path / "c" / "trainer.json").read_text())["resolved"]["eps"] == 1e-6
    t.step()                                                  # the uninterrupted run's second step
    monkeypatch.setitem(grpo.__kwdefaults__, "eps", 0.5)      # a newer release changed the entry's default
    back = Trainer.load(tmp_path / "c")
    assert back.knob("eps") == 1e-6
    back.step()
    keep = ("loss", "reward", "entropy")
    assert {k: back.history[1][k] for k in keep} == {k: t.history[1][k] for k in keep}
