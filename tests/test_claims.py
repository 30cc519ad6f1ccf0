"""The claims registry: the verdict rule, the power calculation, and the README's claims table generated from the
shipped results files (a stale table fails here: run ``python scripts/regen_tables.py``)."""

import math
import re
from pathlib import Path

import pytest

from rlnb.studies import Stat, cheatsheet, claims, docs_tables, load_result
from rlnb.studies.decide import VERDICTS, load_plans

ROOT = Path(__file__).resolve().parents[1]


def test_the_interval_uses_student_t():
    lo, hi = Stat((1.0, 2.0, 3.0, 4.0, 5.0)).ci95()             # mean 3, sd sqrt(2.5), t(4) = 2.776
    assert math.isclose(hi - 3.0, 2.776 * math.sqrt(2.5) / math.sqrt(5), rel_tol=1e-9) and math.isclose(lo + hi, 6.0)


def test_seeds_needed_grows_as_the_gap_shrinks():
    wide, narrow = Stat((0.0, 0.2, 0.1, 0.3, 0.15)), Stat((0.0, 0.04, 0.02, 0.06, 0.03))
    assert claims.seeds_needed(Stat(tuple(v + 0.5 for v in wide.values))) < claims.seeds_needed(wide)
    assert claims.seeds_needed(narrow) == claims.seeds_needed(Stat(tuple(10 * v for v in narrow.values)))
    assert claims.seeds_needed(Stat((0.1, -0.1))) == math.inf
    assert claims.seeds_needed(Stat((0.1, 0.3, 0.2))) == 5  # the t distribution: the normal approximation says 2


def test_race_power_on_the_shipped_race():
    power = claims.race_power(load_result("bench_recipes_add60"))
    assert power["df"] == 11 and 0 < power["sd"] < 0.1            # 11 recipes besides none, 2 seeds each
    gaps = [abs(g) for g, _ in power["arms"].values()]
    assert gaps == sorted(gaps, reverse=True)
    needs = [n for _, n in power["arms"].values()]
    assert needs == sorted(needs)                                  # a smaller gap needs more seeds


def test_every_training_level_claim_has_a_plan_and_one_of_the_four_verdicts():
    plans = load_plans()
    for c in claims.CLAIMS:
        if isinstance(c.evidence, str):
            continue
        assert c.plan in plans, (c.text, "a training-level claim without a plan")
        plan = plans[c.plan][0]
        assert len(plan.seeds) >= 5 and plan.mde > 0
        if c.evidence is not None:
            res = load_result(c.evidence.file)
            assert {c.evidence.arm, c.evidence.control} <= set(res.arms), (c.text, res.arms)
        d = claims.describe(c)
        assert d["verdict"] in (*VERDICTS, "not measured"), (c.text, d["verdict"])
        assert f"MDE {plan.mde:g}" in d["line"] and " seeds" in d["line"]
        if d["verdict"] == "untestable":
            assert "needs" in d["line"]  # the measured reason beside the bound it missed
        if c.evidence is not None and plans[c.plan][1] > "2026-12-06":  # measured days before the plans
            assert "plan written after the data" in d["line"]


def test_an_untestable_row_names_the_measured_reason():
    from rlnb.studies.planned import judge, plan_for

    plan, written, _ = plan_for("maxrl_pass_k")   # the shipped maxrl_long: GRPO's own pass@8 drop not established
    dec, label = judge(plan, "maxrl_long", "maxrl", "grpo", written)
    assert dec.verdict == "untestable" and "GRPO's own pass@8 change" in dec.line and "needs < +0.000" in dec.line
    assert "plan written after the data" in label
    line = claims.describe(next(c for c in claims.CLAIMS if c.plan == "maxrl_pass_k"))["line"]
    assert dec.line in line                        # the row shows it, as its verdict or as the earlier attempt


def test_every_training_level_row_rests_on_five_seeds_or_names_why_it_is_untestable():
    for c in claims.CLAIMS:
        if isinstance(c.evidence, str):
            continue
        d = claims.describe(c)
        n = d["stat"].n if "stat" in d else 0
        assert n >= 5 or d["verdict"] == "untestable", (c.text, n, d["verdict"])


def test_readme_claims_table_is_generated():
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- claims:start -->\n(.*?)\n<!-- claims:end -->", text, re.S)
    assert block, "README.md: no claims markers"
    assert block.group(1) == claims.table_markdown(), "README claims table is stale: python scripts/regen_tables.py"


@pytest.mark.parametrize("path, marker, make", [
    ("docs/studies.md", "verdicts", lambda: docs_tables.verdicts_markdown()),
    ("docs/studies.md", "plans", lambda: docs_tables.plans_markdown()),
    ("docs/studies.md", "second-attempt", lambda: docs_tables.studies_markdown().rstrip("\n")),
    ("docs/studies.md", "third-attempt", lambda: docs_tables.studies_markdown(docs_tables.THIRD_ATTEMPT).rstrip("\n")),
    ("docs/cheatsheet.md", "cheatsheet", lambda: cheatsheet.table_markdown()),
])
def test_docs_and_cheat_sheet_are_generated_from_the_results(path, marker, make):
    text = (ROOT / path).read_text()
    block = re.search(rf"<!-- {marker}:start -->\n(.*?)\n<!-- {marker}:end -->", text, re.S)
    assert block, f"{path}: no {marker} markers"
    assert block.group(1) == make(), f"{path} {marker} is stale: python scripts/regen_tables.py"


def test_the_cheat_sheet_recommends_only_what_a_reproduced_row_supports():
    for row in cheatsheet.table_markdown().splitlines()[2:]:
        supported = row.split(" | ")[2]
        for knob in supported.split("; ") if supported != "-" else ():
            assert "*: reproduced" in knob, knob


def test_a_chapters_verdict_is_short_with_the_whole_row_folded_and_an_unknown_plan_is_an_error():
    text = claims.verdict_markdown("bonus", "thermostat")
    for key in ("bonus", "thermostat"):
        c = next(c for c in claims.CLAIMS if c.plan == key)
        d = claims.describe(c)
        short, line = d["short"], d["line"]
        assert short.startswith(line.split(":", 1)[0])          # the same verdict words lead both
        assert "docs/results/" not in short and len(short) < len(line)
        assert f"*{c.text}*: {short}" in text and line in text   # the whole row is there, folded
    assert text.count("<details>") == 2 == text.count("</details>")
    with pytest.raises(KeyError, match="clip_higher_entropy'"):   # a renamed plan cannot drop a row silently
        claims.verdict_markdown("clip_higher_entropy")
