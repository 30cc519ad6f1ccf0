"""The glossary, the cheat sheet and the README name notebooks by file name: each one named must exist, and no
notebook is marked planned once it exists."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NAME = re.compile(r"`?\b(\d\d_[a-z0-9_]+)\b`?( \*\(planned\)\*)?")
DOCS = [ROOT / "docs" / "glossary.md", ROOT / "docs" / "cheatsheet.md", ROOT / "README.md"]


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
