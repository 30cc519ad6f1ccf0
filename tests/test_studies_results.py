"""Loading the shipped study results, and running a preset with overridden settings."""

import json

import pytest

from rlnb import studies
from rlnb.studies import RunResult, Study, StudyResult, load_result


def small_result() -> StudyResult:
    runs = [RunResult("a", s, [{"step": 1, "entropy": 0.5 + s}], [{"step": 0, "samples": 0, "x": 1.0}]) for s in (0, 1)]
    return StudyResult(runs, {"name": "small", "arms": {"a": {}}, "seeds": [0, 1]})


def test_shipped_beta_result_has_the_documented_numbers():
    res = load_result("beta")
    assert res.arms == ["beta=0", "beta=0.04", "beta=0.5"] and res.seeds == [0, 1, 2]
    # docs/studies.md, section 2: KL to init per seed 0.099 / 0.104 / 0.128 (beta 0), 0.011 / 0.009 / 0.010 (0.5)
    kl0 = res.value("beta=0", "final:eval/kl_to_init").values
    kl5 = res.value("beta=0.5", "final:eval/kl_to_init").values
    assert [round(v, 3) for v in kl0] == [0.099, 0.104, 0.128]
    assert [round(v, 3) for v in kl5] == [0.011, 0.009, 0.010]
    assert "beta" in studies.result_names() and "zoo_race" in studies.result_names()


def test_load_from_a_folder_and_from_the_environment(tmp_path, monkeypatch):
    small_result().to_json(tmp_path / "small.json.gz")
    (tmp_path / "plain.json").write_text(small_result().to_json())
    assert studies.result_names(tmp_path) == ["plain", "small"]
    for name in ("small", "plain"):
        res = load_result(name, root=tmp_path)
        assert res.arms == ["a"] and res.seeds == [0, 1] and res.run("a", 1).history[0]["entropy"] == 1.5
    monkeypatch.setenv("RLNB_RESULTS", str(tmp_path))
    assert load_result("small").run("a", 0).evals[0]["x"] == 1.0


def test_clear_errors(tmp_path):
    small_result().to_json(tmp_path / "small.json")
    with pytest.raises(FileNotFoundError, match=r"'nope'.*\['small'\]"):
        load_result("nope", root=tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_result("small", root=tmp_path / "missing")
    (tmp_path / "rows.json").write_text(json.dumps({"rows": [{"G": 2}]}))
    with pytest.raises(ValueError, match="not a StudyResult"):
        load_result("rows", root=tmp_path)
    with pytest.raises(TypeError, match="name"):
        load_result(None)


def test_study_run_overrides_settings_for_one_run():
    seen = {}
    study = Study("s", "claim", {"x": {"lr": 1.0}, "y": {"lr": 2.0}}, {"task": "add", "steps": 30, "seeds": (0, 1, 2)},
                  runner=lambda arms, **kw: seen.update(arms=arms, **kw))
    study.run(arms=["y"], seeds=(0,), steps=5, eval_n=0, progress=False)
    assert seen == {"arms": {"y": {"lr": 2.0}}, "name": "s", "progress": False, "task": "add", "steps": 5,
                    "seeds": (0,), "eval_n": 0}
    assert study.settings["steps"] == 30                                # the preset itself is unchanged
