"""Small refusals: a bool is not a kept step, a bad keep setting is named by the LabLoop argument and changes
nothing, and a repeated seed is not counted as another seed."""

import pytest

from rlnb import Trainer
from rlnb.lab import LabLoop
from rlnb.run import owner
from rlnb.studies import StudyResult, run_study
from rlnb.studies.runner import RunResult


def tiny():
    return Trainer.tiny("grpo", prompts_per_step=1, num_generations=2, max_new_tokens=4)


def test_rewind_true_is_refused_and_the_run_stays_where_it_is():
    t = tiny()
    loop = LabLoop(t, keep_every=1)
    try:
        loop.step()
        loop.step()
        assert 1 in loop.kept.steps()                   # True == 1: it would have gone back to step 1
        with pytest.raises(TypeError, match=r"^step: expected a kept step \(an int; kept: \[0, 1, 2\]\) or None, got True"):
            loop.rewind(True)
        assert t.step_count == 2 and len(t.history) == 2
    finally:
        loop.close()


@pytest.mark.parametrize("kw, message", [
    ({"keep_every": 0}, r"^keep_every: expected an int >= 1, got 0"),
    ({"keep_every": True}, r"^keep_every: expected an int >= 1, got True"),
    ({"keep_limit": 1}, r"^keep_limit: expected an int >= 2, got 1"),
])
def test_a_bad_keep_setting_is_named_by_its_argument_and_changes_nothing(kw, message):
    t = tiny()
    with pytest.raises(ValueError, match=message):
        LabLoop(t, knobs=("lr",), **kw)
    assert t.logged_knobs == () and owner.holder_of(t) is None


def two_seeds():
    runs = [RunResult("a", s, [{"reward": 0.1 * s}]) for s in (0, 1)]
    return StudyResult(runs, {"name": "x", "arms": {"a": {}}, "seeds": [0, 1]})


def test_merging_a_result_with_itself_is_refused():
    r = two_seeds()
    with pytest.raises(ValueError, match=r"^results\[1\]: arm 'a' seed 0 is already in results\[0\]"):
        StudyResult.merge(r, r)
    assert len(StudyResult.merge(r).runs) == 2


def test_run_study_refuses_a_repeated_seed_before_training(monkeypatch):
    monkeypatch.setattr("rlnb.studies.runner.Trainer", None)  # training would fail loudly; it must not start
    with pytest.raises(ValueError, match=r"^seeds: expected distinct seeds, got \[0, 0\] \(repeated: \[0\]\)"):
        run_study({"a": {}}, task="add", seeds=[0, 0], steps=1, progress=False)
