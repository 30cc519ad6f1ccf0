"""docs/teaching.md's plans checked against the notebooks: every exercise a plan sets is an exercise of that chapter,
every race it projects is run by that chapter's code, no chapter (or race, or exercise) comes before one it needs,
the slots follow each other and hold their runs, and the set-up timetable fits the plan's set-up slot. (The run
minutes against runtimes.json: tests/test_docs_links.py, to one decimal.)

The prerequisites are this file's table (NEEDS): the notebooks state what they teach ("You will learn"), not what
they assume, so the table is the course's order as the chapters use it, kept here where a test reads it."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEACHING = ROOT / "docs" / "teaching.md"
# chapter -> the chapters it uses: 03's advantages read 00's groups; 05's clip acts on 03's advantages; 06's KL and
# entropy are knobs of 05's update; 07's hacking is read through 06's KL; 08's aggregation is of 05's per-token loss;
# 10 (DAPO) is clip-higher (05), token-mean (08) and the overlong penalty (02); 13's lab moves 05's knobs; 16
# diagnoses with entropy (06) and races recipes as 13 does
NEEDS = {"01": {"00"}, "02": {"00"}, "03": {"00"}, "04": {"03"}, "05": {"03"}, "06": {"05"}, "07": {"06"},
         "08": {"05"}, "09": {"03"}, "10": {"02", "05", "08"}, "11": {"05"}, "12": {"03", "05"}, "13": {"05"},
         "14": {"08"}, "15": {"00"}, "16": {"06", "13"}}
# what one race or one exercise needs beyond its chapter: beta is 06's penalty; 16's exercise 1 fits 12's curve
RACE_NEEDS = {"beta": {"06"}}
EXERCISE_NEEDS = {("16", "1. the curve"): {"12"}}
ROW = re.compile(r"^\| \d+:\d\d \|.*\|$", re.M)  # a plan's row: | time | what | run | project | exercises |
BOLD = re.compile(r"\*\*(.+?)\*\*")
RACE = re.compile(r"\brac(?:e|es|ed|ing)\b([^;|]*)")
CODE = re.compile(r"`([^`]+)`")


def norm(name: str) -> str:
    """An exercise name as compared: no TeX markup, case or final period (`$k_3$` and `k3` are one name)."""
    return re.sub(r"[$\\{}_]", "", name).strip().rstrip(".").lower()


def notebook(chapter: str) -> dict:
    (path,) = (ROOT / "notebooks").glob(f"{chapter}_*.ipynb")
    return json.loads(path.read_text())


def exercises(chapter: str) -> set[str]:
    """The chapter's exercise names: each bold paragraph opening after its '## Exercises' heading."""
    names, after = set(), False
    for cell in notebook(chapter)["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] != "markdown":
            continue
        if "## Exercises" in text:
            after, text = True, text.split("## Exercises", 1)[1]
        if after:
            names |= {norm(m) for m in re.findall(r"^\*\*([^*]+?)\*\*", text, re.M)}
    return names - {"next:"}


def code(chapter: str) -> str:
    """The chapter's code cells, without spaces (`fork(beta=0.1)` matches `fork(beta = 0.1)`)."""
    return re.sub(r"\s", "", "\n".join("".join(c["source"]) for c in notebook(chapter)["cells"]
                                       if c["cell_type"] == "code"))


def minutes(clock: str) -> int:
    h, m = clock.split(":")
    return int(h) * 60 + int(m)


def plans() -> dict[str, list[dict]]:
    """{plan title: its rows}, each row: start (minutes), what (a chapter number, or the row's label), exercises,
    races (their backticked names), project (the text)."""
    text = TEACHING.read_text()
    out = {}
    for block in text.split("\n## ")[1:]:
        title = block.split("\n", 1)[0]
        if not title.startswith("The ") or " plan" not in title:
            continue
        rows = []
        for line in ROW.findall(block):
            start, what, run, project, sets = [c.strip() for c in line.strip().strip("|").split("|")]
            chapter = re.match(r"`(\d\d)_", what)
            rows.append({"start": minutes(start), "what": chapter.group(1) if chapter else what,
                         "chapter": bool(chapter), "project": project,
                         "exercises": [norm(b) for b in BOLD.findall(sets)],
                         "races": [c for seg in RACE.findall(project) for c in CODE.findall(seg)]})
        out[title] = rows
    return out


def problems(rows: list[dict]) -> list[str]:
    """What is wrong with one plan's rows against the notebooks."""
    out, seen = [], set()
    for i, row in enumerate(rows):
        if i and row["start"] <= rows[i - 1]["start"]:
            out.append(f"{row['what']}: starts at or before the row above")
        if not row["chapter"]:
            continue
        ch = row["what"]
        for missing in sorted(NEEDS.get(ch, set()) - seen):
            out.append(f"{ch}: needs {missing}, which the plan does not teach before it")
        have = exercises(ch)
        for ex in row["exercises"]:
            if ex not in have:
                out.append(f"{ch}: no exercise {ex!r} (it has {sorted(have)})")
            for missing in sorted(EXERCISE_NEEDS.get((ch, ex), set()) - seen):
                out.append(f"{ch}: exercise {ex!r} needs {missing}, not taught before it")
        source = code(ch)
        for name in row["races"]:
            if re.sub(r"\s", "", name) not in source:
                out.append(f"{ch}: races {name!r}, which its code does not run")
            for key, need in RACE_NEEDS.items():
                if key in name:
                    out += [f"{ch}: the race of {name!r} needs {m}, not taught before it" for m in sorted(need - seen)]
        seen.add(ch)
    return out


def test_the_checker_catches_each_kind_of_mistake():
    rows = [{"start": 0, "what": "00", "chapter": True, "exercises": ["pass@k"], "races": [], "project": ""},
            {"start": 30, "what": "13", "chapter": True, "exercises": ["1. a second seed"],
             "races": ["fork(beta=0.1)", "fork(lr=3e-4)"], "project": ""},
            {"start": 20, "what": "16", "chapter": True, "exercises": ["1. the curve"], "races": [], "project": ""}]
    found = problems(rows)
    assert "13: needs 05, which the plan does not teach before it" in found
    assert any(f.startswith("13: no exercise '1. a second seed'") for f in found)
    assert "13: races 'fork(lr=3e-4)', which its code does not run" in found
    assert "13: the race of 'fork(beta=0.1)' needs 06, not taught before it" in found
    assert "16: starts at or before the row above" in found
    assert "16: exercise '1. the curve' needs 12, not taught before it" in found
    assert not any(f.startswith("00") for f in found)


def test_there_are_two_plans_and_each_teaches_chapters():
    found = plans()
    assert len(found) == 2 and all(sum(r["chapter"] for r in rows) >= 4 for rows in found.values()), list(found)


@pytest.mark.parametrize("title", sorted(plans()))
def test_each_plan_fits_the_notebooks(title):
    assert problems(plans()[title]) == []


def setup_table() -> list[tuple[int, int]]:
    """The set-up timetable's rows: (start, minutes)."""
    text = TEACHING.read_text().split("## Set-up on the day", 1)[1].split("\n## ", 1)[0]
    return [(minutes(a), int(b)) for a, b in re.findall(r"^\| (\d+:\d\d) \| [^|]+ \| (\d+) min \|", text, re.M)]


@pytest.mark.parametrize("title", sorted(plans()))
def test_the_set_up_timetable_fits_each_plans_set_up_slot(title):
    rows = plans()[title]
    first = next(i for i, r in enumerate(rows) if r["chapter"])
    assert first > 0 and rows[first - 1]["what"] == "(set-up)", f"{title}: expected a set-up row first"
    slot = rows[first]["start"] - rows[first - 1]["start"]
    table = setup_table()
    assert len(table) >= 3
    assert all(b[0] == a[0] + a[1] for a, b in zip(table, table[1:])), "the timetable's rows must follow each other"
    assert table[-1][0] + table[-1][1] - table[0][0] <= slot, f"{title}: the set-up takes longer than its {slot} min"


def test_the_full_mode_site_time_is_the_sum_of_the_chapters_runtimes():
    """teaching.md's time for `build_site.py --full`: the chapters' full-mode seconds summed, in whole minutes."""
    runtimes = json.loads((ROOT / "docs" / "results" / "runtimes.json").read_text())
    text = TEACHING.read_text().split("python scripts/build_site.py --full", 1)[1][:300]
    stated = re.search(r"about (\d+) minutes", text)
    assert stated, "teaching.md: say how long the full-mode site takes, right after its command"
    assert int(stated.group(1)) == round(sum(e["seconds"] for e in runtimes.values()) / 60)
