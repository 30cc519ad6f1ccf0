"""The decision rule of every training-level claim (rlnb.studies.decide): power by the t distribution, the four
verdicts with hand-computed intervals, activity checks, plans written once and before the data."""

import json
import math

import pytest

from rlnb.studies import Stat
from rlnb.studies.decide import (
    Check,
    Plan,
    decide,
    plan_before_data,
    seeds_for_power,
    t_quantile_80,
    write_plans,
)
from rlnb.studies.results import RunResult, StudyResult


def test_power_uses_the_t_distribution_not_only_the_normal():
    # normal approximation: ((1.96 + 0.84) x 1)^2 = 7.84 -> 8 seeds; the t distribution at n = 8 (df 7):
    # (2.365 + 0.896)^2 = 10.6 > 8, so more are needed: 10 ((2.262 + 0.883)^2 = 9.89 <= 10).
    assert seeds_for_power(1.0, 1.0) == 10
    assert seeds_for_power(0.0, 0.1) == 5                      # never fewer than 5
    assert seeds_for_power(0.2, 0.1) > seeds_for_power(0.1, 0.1)  # a wider spread needs more
    assert t_quantile_80(4) == 0.941
    with pytest.raises(ValueError, match="mde"):
        seeds_for_power(0.1, 0.0)


def test_reproduced_needs_the_whole_interval_on_the_claimed_side():
    d = decide(Stat((-0.1, -0.2, -0.15)), -1, 0.05)           # claimed < 0; -0.15 -/+ 0.124
    assert d.verdict == "reproduced" and "3 of 3 seeds on the claimed side" in d.line
    assert math.isclose(d.ci[1], -0.15 + 4.303 * 0.05 / math.sqrt(3), rel_tol=1e-9)


def test_an_interval_below_the_mde_is_an_informative_null():
    d = decide(Stat((0.01, -0.01, 0.0)), 1, 0.05)             # upper end 0.0248 < 0.05
    assert d.verdict == "excluded" and d.line.startswith("effect above +0.025 excluded:")
    opposite = decide(Stat((-0.1, -0.2, -0.15)), 1, 0.05)     # wholly below 0 for a claimed rise
    assert opposite.verdict == "excluded" and "(the opposite direction)" in opposite.line
    assert "0 of 3 seeds on the claimed side" in opposite.line


def test_inconclusive_names_the_effects_not_excluded():
    d = decide(Stat((0.1, -0.1, 0.0)), 1, 0.05)                # upper end 0.248 >= 0.05
    assert d.verdict == "inconclusive" and d.line.startswith("inconclusive: effects up to +0.248 not excluded")


def test_claimed_side_is_counted_not_the_majority():
    d = decide(Stat((-0.1, -0.1, -0.1, 0.05, -0.2)), 1, 0.5)  # the majority is against the claim
    assert "1 of 5 seeds on the claimed side" in d.line


def test_a_failed_activity_check_makes_it_untestable_with_the_measured_reason():
    res = StudyResult([RunResult(a, s, [{"step": 1, "clip_ratio/high_mean": x}]) for a, s, x in
                       [("grpo", 0, 0.0004), ("grpo", 1, 0.0004), ("+ch", 0, 0.0), ("+ch", 1, 0.0)]], {})
    check = Check("mean:clip_ratio/high_mean", "control", ">=", 0.01, "tokens clipped high", percent=True)
    ok, reason = check.measure(res, "+ch", "grpo")
    assert not ok and "0.04 %" in reason and "needs >= 1.00 %" in reason
    d = decide(Stat((0.1, 0.2)), 1, 0.05, failed=reason)
    assert d.verdict == "untestable" and d.line.startswith("untestable here: tokens clipped high: 0.04 %")


def _plan(**kw):
    base = dict(claim="x", file="f", arm="a", control="b", spec="final:reward", sign=1, mde=0.1, mde_reason="r",
                pilot="p", pilot_sd=0.05, seeds=tuple(range(10, 15)))
    return Plan(**{**base, **kw})


def test_a_plan_needs_five_seeds_a_sign_and_a_positive_mde():
    with pytest.raises(ValueError, match="seeds"):
        _plan(seeds=(10, 11, 12))
    with pytest.raises(ValueError, match="sign"):
        _plan(sign=0)
    with pytest.raises(ValueError, match="mde"):
        _plan(mde=0.0)


def test_a_written_plan_is_not_changed(tmp_path):
    path = tmp_path / "plans.json"
    write_plans({"x": _plan()}, path, commit="abc")
    written = json.loads(path.read_text())["plans"]["x"]["written"]
    write_plans({"x": _plan()}, path, commit="def")             # the same plan again: kept as it was
    assert json.loads(path.read_text())["plans"]["x"]["written"] == written
    with pytest.raises(ValueError, match="already written"):
        write_plans({"x": _plan(mde=0.2)}, path)


def test_runs_before_the_plan_are_labelled():
    run = lambda ended: RunResult("a", 0, [], info={"ended": ended} if ended else {})  # noqa: E731
    assert plan_before_data(StudyResult([run("2026-12-07T00:00:00Z")], {}), "2026-12-06T11:00:00Z")
    assert not plan_before_data(StudyResult([run("2026-12-05T00:00:00Z")], {}), "2026-12-06T11:00:00Z")
    assert not plan_before_data(StudyResult([run(None)], {}), "2026-12-06T11:00:00Z")  # no time: predates


def _result(pairs: dict, seeds, ended=None) -> StudyResult:
    """arm -> per-seed values of `entropy` (one step each), as a StudyResult (runs without a time predate plans)."""
    runs = [RunResult(arm, s, [{"step": 1, "entropy": v}], info={"ended": ended} if ended else {})
            for arm, vals in pairs.items() for s, v in zip(seeds, vals)]
    return StudyResult(runs, {"status": "complete"})


def test_a_third_attempt_decides_its_row_once_every_planned_run_is_done(tmp_path):
    from rlnb.studies.planned import row

    write_plans({"x": _plan(file="x_third", spec="mean:entropy", mde=0.05)}, tmp_path / "plans.json", commit="c")
    _result({"a": [0.30] * 5, "b": [0.30, 0.31, 0.29, 0.30, 0.30]}, range(5)).to_json(tmp_path / "x_old.json.gz")
    third = _result({"a": [0.50, 0.52, 0.49, 0.51, 0.50], "b": [0.30] * 5}, range(10, 15), "2099-01-01T00:00:00Z")
    StudyResult(third.runs[:-1], {"status": "9 of 10 runs (partial)"}).to_json(tmp_path / "x_third.json.gz")
    partial = row("x", ("x_old", "a", "b"), root=tmp_path)
    assert partial["verdict"] == "excluded" and "plan written after the data" in partial["line"]
    assert "interim" in partial["line"] and "9 of 10 runs done" in partial["line"]
    third.to_json(tmp_path / "x_third.json.gz")
    done = row("x", ("x_old", "a", "b"), root=tmp_path)
    assert done["verdict"] == "reproduced" and "earlier: effect above" in done["line"]
    assert "plan written after the data" not in done["line"].split("; earlier")[0]


def test_a_study_without_a_plan_refuses_to_run(tmp_path):
    from rlnb.studies.third_attempt import planned_seeds

    with pytest.raises(ValueError, match="no plan"):
        planned_seeds("entropy_third", root=tmp_path)
