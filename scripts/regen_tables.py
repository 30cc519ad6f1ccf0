"""Rewrite the generated tables: the README's recipe and claims tables, docs/knobs.md's knob table and
docs/scaling_up.md's table of the three exits.

    python scripts/regen_tables.py

The recipe and knob tables come from the declarations (``rlnb.recipes``, ``rlnb.Recipe``'s knobs), the claims
table from the results files (``rlnb.studies.claims``), the numbers against TRL from the benchmark's raw output
(``rlnb.bench.vs_trl_readme``); tests/test_knobs.py, tests/test_recipes.py, tests/test_claims.py,
tests/test_bench_readme.py and tests/test_export_verl_launch.py fail when a committed table differs from what this
writes.
"""

import re
from pathlib import Path

import rlnb
from rlnb.algos.resolve import knob_table_markdown
from rlnb.bench.train_readme import train_markdown
from rlnb.bench.vs_trl_readme import block_markdown, waits_markdown
from rlnb.export.exits import exits_table
from rlnb.studies import cheatsheet, claims, docs_tables

ROOT = Path(__file__).resolve().parents[1]


def fill(path: Path, marker: str, table: str) -> None:
    text = path.read_text()
    pattern = rf"(<!-- {marker}:start -->\n).*?(\n<!-- {marker}:end -->)"
    if not re.search(pattern, text, re.S):
        raise SystemExit(f"{path}: no <!-- {marker}:start/end --> markers")
    path.write_text(re.sub(pattern, lambda m: m.group(1) + table + m.group(2), text, flags=re.S))


if __name__ == "__main__":
    fill(ROOT / "README.md", "recipes", rlnb.recipes.table_markdown())
    fill(ROOT / "README.md", "claims", claims.table_markdown())
    fill(ROOT / "README.md", "bench", block_markdown(ROOT / "docs" / "bench_vs_trl.txt"))
    fill(ROOT / "README.md", "waits", waits_markdown(ROOT / "docs" / "bench_waits.txt"))
    fill(ROOT / "README.md", "train", train_markdown(ROOT / "docs" / "train_grpo_add.json"))
    fill(ROOT / "docs" / "studies.md", "verdicts", docs_tables.verdicts_markdown())
    fill(ROOT / "docs" / "studies.md", "plans", docs_tables.plans_markdown())
    fill(ROOT / "docs" / "studies.md", "second-attempt", docs_tables.studies_markdown().rstrip("\n"))
    fill(ROOT / "docs" / "studies.md", "third-attempt",
         docs_tables.studies_markdown(docs_tables.THIRD_ATTEMPT).rstrip("\n"))
    fill(ROOT / "docs" / "cheatsheet.md", "cheatsheet", cheatsheet.table_markdown())
    fill(ROOT / "docs" / "knobs.md", "knobs", knob_table_markdown(rlnb.Recipe))
    fill(ROOT / "docs" / "scaling_up.md", "exits", exits_table())
    print("wrote README.md (recipes, claims, train, bench, waits), docs/knobs.md (knobs), docs/studies.md (verdicts, plans, second and "
          "third attempts), docs/cheatsheet.md and docs/scaling_up.md (exits)")
