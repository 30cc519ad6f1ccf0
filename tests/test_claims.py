"""The claims registry: the verdict rule, the power calculation, and the README's claims table generated from the
shipped results files (a stale table fails here: run ``python scripts/regen_tables.py``)."""

import math
import re
from pathlib import Path

from rlnb.studies import Stat, claims, load_result

ROOT = Path(__file__).resolve().parents[1]


def test_the_verdict_follows_the_interval():
    assert claims.verdict(Stat((0.10, 0.12, 0.11, 0.09, 0.13))) == "reproduced"
    assert claims.verdict(Stat((-0.10, -0.12, -0.11, -0.09, -0.13))) == "the opposite"
    assert claims.verdict(Stat((-0.10, -0.12, -0.11, -0.09, -0.13)), sign=-1) == "reproduced"
    assert claims.verdict(Stat((0.1, -0.1, 0.05, -0.02, 0.0))) == "not reproduced"
    assert claims.verdict(Stat((0.1,))) == "not measured"        # one seed has no interval


def test_the_interval_uses_student_t():
    lo, hi = Stat((1.0, 2.0, 3.0, 4.0, 5.0)).ci95()             # mean 3, sd sqrt(2.5), t(4) = 2.776
    assert math.isclose(hi - 3.0, 2.776 * math.sqrt(2.5) / math.sqrt(5), rel_tol=1e-9) and math.isclose(lo + hi, 6.0)


def test_seeds_needed_grows_as_the_gap_shrinks():
    wide, narrow = Stat((0.0, 0.2, 0.1, 0.3, 0.15)), Stat((0.0, 0.04, 0.02, 0.06, 0.03))
    assert claims.seeds_needed(Stat(tuple(v + 0.5 for v in wide.values))) < claims.seeds_needed(wide)
    assert claims.seeds_needed(narrow) == claims.seeds_needed(Stat(tuple(10 * v for v in narrow.values)))
    assert claims.seeds_needed(Stat((0.1, -0.1))) == math.inf


def test_race_power_on_the_shipped_race():
    power = claims.race_power(load_result("bench_recipes_add60"))
    assert power["df"] == 11 and 0 < power["sd"] < 0.1            # 11 recipes besides none, 2 seeds each
    gaps = [abs(g) for g, _ in power["arms"].values()]
    assert gaps == sorted(gaps, reverse=True)
    needs = [n for _, n in power["arms"].values()]
    assert needs == sorted(needs)                                  # a smaller gap needs more seeds


def test_every_shipped_claim_names_an_existing_file_and_arms():
    for c in claims.CLAIMS:
        if isinstance(c.evidence, str):
            continue
        res = load_result(c.evidence.file)
        arms = [c.evidence.arm] + ([c.evidence.control] if c.evidence.control else [])
        assert set(arms) <= set(res.arms), (c.text, arms, res.arms)
        assert claims.describe(c)["source"].startswith(f"shipped (docs/results/{c.evidence.file}.json.gz")


def test_readme_claims_table_is_generated():
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- claims:start -->\n(.*?)\n<!-- claims:end -->", text, re.S)
    assert block, "README.md: no claims markers"
    assert block.group(1) == claims.table_markdown(), "README claims table is stale: python scripts/regen_tables.py"
