"""The studies that were hand-rolled scripts (issue 39): each runs on a tiny preset through the studies runner and
its result loads with ``load_result``; the shipped files, converted without re-running, keep the old numbers; the
token budget counts Monte-Carlo continuations; the scripts are thin entry points of ``python -m rlnb.studies``."""

import math
import subprocess
import sys
from pathlib import Path

import pytest

from rlnb import studies
from rlnb.studies import load_result, run_study
from rlnb.studies.cli import main

ROOT = Path(__file__).resolve().parents[1]
TINY = dict(seeds=(0,), prompts_per_step=2, num_generations=2, progress=False)
PORTED = ("reward_hacking", "ppo_vs_grpo", "credit_race", "entropy_clip")


@pytest.mark.parametrize("name", PORTED)
def test_each_ported_study_runs_tiny_and_its_result_loads(name, tmp_path):
    st = studies.get(name, smoke=True)
    budget = dict(tokens=60) if "tokens" in st.settings else dict(steps=1)
    res = st.run(**TINY, **budget, eval_n=min(st.settings.get("eval_n", 0), 2))
    res.to_json(tmp_path / f"{name}.json")
    back = load_result(name, root=tmp_path)
    assert back.arms == list(st.arms) and back.seeds == [0] and back.config["name"] == name
    for run in back.runs:
        assert run.history and run.history[-1]["samples"] > 0 and run.history[-1]["tokens"] > 0
        assert "load" in run.info or not hasattr(__import__("os"), "getloadavg")
    assert back.summary(st.specs).rows()                                   # the preset's own specs reduce


def test_a_token_budget_counts_monte_carlo_continuations():
    arms = {"vineppo": {"advantage": "vineppo", "mc_rollouts": 2, "warmup_steps": 0}, "grpo": {"warmup_steps": 0}}
    res = run_study(arms, task="add", tokens=40, eval_every=20, eval_n=2, **TINY)
    for run in res.runs:
        h = run.history
        assert h[-1]["tokens"] >= 40 and (len(h) == 1 or h[-2]["tokens"] < 40)      # stops at the first step past it
        assert run.evals[0]["tokens"] == 0 and run.evals[-1]["tokens"] == h[-1]["tokens"]
        assert all("wall_s" in e for e in run.evals)
    # VinePPO's continuations count: its first step costs more tokens than GRPO's on the same first batch
    v, g = res.run("vineppo", 0).history[0], res.run("grpo", 0).history[0]
    assert v["completions/mean_length"] == g["completions/mean_length"] and v["tokens"] > g["tokens"]
    assert res.config["tokens"] == 40 and "steps" not in res.config


def test_a_study_takes_exactly_one_budget():
    with pytest.raises(ValueError, match="exactly one budget"):
        run_study({"a": {}}, task="add", seeds=[0], progress=False)
    with pytest.raises(ValueError, match="exactly one budget"):
        run_study({"a": {}}, task="add", seeds=[0], steps=2, tokens=10, progress=False)
    with pytest.raises(ValueError, match="tokens: expected a positive int"):
        run_study({"a": {}}, task="add", seeds=[0], tokens=0, progress=False)
    with pytest.raises(ValueError, match="match_samples"):
        run_study({"a": {}}, task="add", seeds=[0], tokens=10, match_samples=True, progress=False)


def test_the_shipped_converted_results_keep_the_chapters_numbers():
    hack = load_result("reward_hacking")
    assert hack.arms == ["beta=0", "beta=0.5", "beta=2"] and hack.seeds == [0, 1, 2]
    assert min(hack.value("beta=0", "final:rewards/loophole/mean", window=1).values) > 0.8      # chapter 07's checks
    assert max(hack.value("beta=2", "max:rewards/loophole/mean").values) < 0.25
    assert all(len(r.history) == 40 for r in hack.runs)
    ppo = load_result("ppo_vs_grpo")
    assert ppo.arms == ["ppo", "grpo"] and [e["step"] for e in ppo.runs[0].evals] == [0, 10, 20, 30]
    assert all(r.wall_s > 0 and r.info["load"] > 0 for r in ppo.runs) and ppo.config["machine"]
    race = load_result("credit_race")
    assert race.arms == ["grpo", "vineppo"] and race.config["tokens"] == 100_000
    assert all(r.evals[-1]["tokens"] >= 100_000 and r.evals[0]["tokens"] == 0 for r in race.runs)
    for res in (hack, ppo, race):                    # the old config is kept beside the new one
        assert "converted_from" in res.config and res.config["name"] in PORTED
        rows = res.summary(studies.get(res.config["name"], smoke=False).specs).rows()
        assert rows and all(math.isfinite(r["mean"]) for r in rows)       # the preset's numbers read the old runs


def test_the_cli_runs_a_study_and_the_scripts_are_its_entry_points(tmp_path, capsys):
    assert main(["list"]) == 0 and "reward_hacking" in capsys.readouterr().out
    for name in ("credit_race", "ppo_vs_grpo", "reward_hacking", "entropy_clip"):
        text = (ROOT / "scripts" / f"{name}.py").read_text()
        assert f'main(["run", "{name}", *sys.argv[1:]])' in text and len(text.splitlines()) < 25
    out = subprocess.run([sys.executable, "scripts/reward_hacking.py", "--help"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and "--smoke" in out.stdout


def test_the_second_attempt_queue_saves_a_study_result_and_keeps_its_settings(tmp_path):
    import copy

    from rlnb.studies import second_attempt as sa

    before = copy.deepcopy(sa.STUDIES)
    small = copy.deepcopy(sa.STUDIES)
    small["maxrl_long"]["setting"].update(steps=1, prompts_per_step=4, num_generations=2, eval_n=2,
                                          eval_sampled_n=0, eval_every=0)
    sa.run(["maxrl_long"], seeds=(0,), out=tmp_path, studies=small)
    res = load_result("maxrl_long", root=tmp_path)
    assert res.arms == ["grpo", "maxrl"] and res.config["status"] == "2 of 2 runs (complete)"
    assert res.config["decision_rule"].startswith("the mean over seeds of the paired per-seed difference")
    assert sa.STUDIES == before                                            # the measured settings stay as written
    assert "from rlnb.studies.claim_cli import main" in (ROOT / "scripts" / "claim_studies.py").read_text()


def test_a_resumed_queue_keeps_runs_whose_setting_has_a_float_the_file_rounds(tmp_path):
    from rlnb.studies import StudyResult
    from rlnb.studies import second_attempt as sa
    from rlnb.studies.results import RunResult

    spec = {"setting": {"task": "add", "tokens": 100000, "eval_every": 100000 / 6}, "arms": {"grpo": {"lr": 1 / 3}},
            "claims": [], "primary": "", "control": "", "notes": ""}
    sa.save("s", spec, [RunResult("grpo", 10, [{"step": 1}])], 2, (10,), tmp_path)
    assert StudyResult.from_json(tmp_path / "s.json.gz").config["eval_every"] != 100000 / 6   # saved rounded
    assert set(sa.done_runs("s", spec, tmp_path)) == {("grpo", 10)}        # still the same setting: kept on resume
    other = {**spec, "setting": {**spec["setting"], "eval_every": 100000 / 7}}
    assert sa.done_runs("s", other, tmp_path) == {}                         # a different setting is retrained


def test_the_recipe_race_table_reads_the_shipped_race(tmp_path, capsys):
    from rlnb.studies import StudyResult, race

    full = load_result("bench_recipes_add60")
    two = StudyResult([r for r in full.runs if r.arm in full.arms[:2]], full.config)   # two recipes: the fits are slow
    two.to_json(tmp_path / "two.json")
    assert race.main(["--from-json", str(tmp_path / "two.json")]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| `")]
    assert [r.split("`")[1] for r in rows] == full.arms[:2] and all(r.count("|") == 9 for r in rows)
    assert "from rlnb.studies.race import main" in (ROOT / "scripts" / "bench_recipes.py").read_text()
