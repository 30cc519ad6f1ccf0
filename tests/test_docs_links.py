"""The glossary, the cheat sheet, the teacher's guide and the README name notebooks by file name: each one named
must exist, and no notebook is marked planned once it exists. The teacher's guide's run times are the runtime
results' own."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NAME = re.compile(r"`?\b(\d\d_[a-z0-9_]+)\b`?( \*\(planned\)\*)?")
DOCS = [ROOT / "docs" / "glossary.md", ROOT / "docs" / "cheatsheet.md", ROOT / "docs" / "teaching.md", ROOT / "README.md"]
# a plan's row: | time | `notebook` | run | ...  (the run in minutes, one decimal)
PLAN_ROW = re.compile(r"^\| [\d:]+ \| `(\d\d_[a-z0-9_]+)` \| (\d+\.\d) min \|", re.M)
# the homework list: `notebook` (3.4 min)
LISTED = re.compile(r"`(\d\d_[a-z0-9_]+)`\s+\((\d+\.\d) min\)")


def stale(text: str, existing: set[str]) -> list[str]:
    """Notebook names in ``text`` that do not exist, and existing ones still marked planned."""
    out = []
    for m in NAME.finditer(text):
        name, planned = m.group(1), m.group(2)
        if not any(name == e or e.startswith(name + "_") for e in existing) and not planned:
            out.append(f"{name}: no such notebook")
        elif name in existing and planned:
            out.append(f"{name}: exists but is marked planned")
    return out


def test_the_checker_catches_a_missing_and_a_stale_planned_notebook():
    existing = {"00_start_here", "04_ppo_critic_and_gae"}
    assert stale("| a | b | `00_start_here` |", existing) == []
    assert stale("`09_credit` and `04_ppo_critic_and_gae` *(planned)*", existing) == [
        "09_credit: no such notebook", "04_ppo_critic_and_gae: exists but is marked planned"]


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_every_notebook_a_document_names_exists(doc):
    existing = {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert stale(doc.read_text(), existing) == []


def wrong_minutes(text: str, runtimes: dict) -> list[str]:
    """Each run time in ``text`` that is not its notebook's full-mode seconds / 60, to one decimal."""
    out = []
    for m in [*PLAN_ROW.finditer(text), *LISTED.finditer(text)]:
        name, minutes = m.group(1), m.group(2)
        if name not in runtimes:
            out.append(f"{name}: not in runtimes.json")
        elif f"{runtimes[name]['seconds'] / 60:.1f}" != minutes:
            out.append(f"{name}: {minutes} min, runtimes.json says {runtimes[name]['seconds'] / 60:.1f}")
    return out


def test_the_minutes_checker_catches_a_stale_number():
    runtimes = {"00_start_here": {"seconds": 240.0}}
    assert wrong_minutes("| 0:15 | `00_start_here` | 4.0 min | x |", runtimes) == []
    assert wrong_minutes("| 0:15 | `00_start_here` | 3.0 min | x |\nthen `01_x` (1.0 min)", runtimes) == [
        "00_start_here: 3.0 min, runtimes.json says 4.0", "01_x: not in runtimes.json"]


def test_the_teaching_plans_take_their_run_times_from_the_runtime_results():
    text = (ROOT / "docs" / "teaching.md").read_text()
    runtimes = json.loads((ROOT / "docs" / "results" / "runtimes.json").read_text())
    plans = text.split("## The 3-hour plan", 1)[1].split("## Stuck points", 1)[0].split("## The 1-day plan", 1)
    assert len(PLAN_ROW.findall(plans[0])) >= 4 and len(PLAN_ROW.findall(plans[1])) >= 8, "a plan lost its rows"
    assert wrong_minutes(text, runtimes) == []
    # every notebook is in the day's plan or its homework list
    named = {m.group(1) for m in [*PLAN_ROW.finditer(plans[1]), *LISTED.finditer(plans[1])]}
    assert named == set(runtimes), sorted(set(runtimes) ^ named)
