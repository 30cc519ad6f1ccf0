"""docs/glossary.md is checked: one row per term (no duplicates, which drift apart and contradict each other),
and every "taught in NN" is true: chapter NN's notebook mentions the term (case-insensitive), or one of the
synonyms listed below for it."""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "docs" / "glossary.md"
ROW = re.compile(r"^\| (?!term \||---)(.+?) \| (.+) \| (`\d\d_.*`) \|$", re.M)
CHAPTER = re.compile(r"`(\d\d_[a-z0-9_]+)`")
# Words a chapter uses for a glossary term when it does not use the glossary's head word itself. A synonym is a
# string the chapter's text must contain (case-insensitive); keep each one a real name for the term.
SYNONYMS = {
    "the loop: sampler": ["four stages"],
    "reward noise: shared vs per-sample": ["per-sample noise"],
    "reward shaping": ["shaping"],
    "overlong penalty": ["overlong_penalty", "overlong punishment"],
    "grpo advantage": ["grpo"],
    "zero-signal": ["no-signal", "frac_reward_zero_std"],
    '"four models in memory"': ["four models"],
    "clip fraction": ["clip_ratio"],
    "rollout policy": ["rollout_logp"],
    "rollout correction": ["rollout_correction"],
    "off-policy sequence mask": ["off_policy_mask"],
    "reference model": ["reference"],
    "kl in the reward": ["in the reward"],
    "greedy vs sampled pass@1": ["greedy"],
    "learning-rate instability": ["learning rate"],
    "scalerl fit": ["scalerl"],
    "fused lm head": ["fused"],
}


def head(term: str) -> str:
    """The term's head word: its text up to the first comma or bracket, math and code kept, lower case."""
    return re.split(r",| \(| / (?=[a-z])", term.strip())[0].strip().lower()


def rows(text: str) -> list[tuple[str, str, list[str]]]:
    """(term, definition, chapters) per table row."""
    return [(m.group(1), m.group(2), CHAPTER.findall(m.group(3))) for m in ROW.finditer(text)]


def duplicates(text: str) -> list[str]:
    seen, out = set(), []
    for term, _, _ in rows(text):
        key = head(term)
        if key in seen:
            out.append(term)
        seen.add(key)
    return out


def untaught(text: str, chapters: dict[str, str]) -> list[str]:
    """Rows whose "taught in" names a chapter whose text mentions neither the head word nor a listed synonym."""
    out = []
    for term, _, names in rows(text):
        key = head(term)
        bare = re.sub(r"\$[^$]*\$|`[^`]*`", "", key).strip()  # "ratio $\rho_t$" is found as "ratio"
        words = [bare or key] + [w.lower() for w in SYNONYMS.get(bare or key, [])]
        for name in names:
            body = chapters.get(name)
            if body is None:
                out.append(f"{term}: no notebook {name}")
            elif not any(w and w in body for w in words):
                out.append(f"{term}: not in {name}")
    return out


def chapter_texts() -> dict[str, str]:
    out = {}
    for p in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(p.read_text())["cells"]
        out[p.stem] = "\n".join("".join(c["source"]) for c in cells).lower()
    return out


def test_the_checks_catch_a_duplicate_and_an_untaught_term():
    text = ("| term | definition | taught in |\n|---|---|---|\n"
            "| GAE | one | `04_x` |\n| critic, value $V$ | two | `04_x` |\n| GAE | three | `04_x` |\n"
            "| forking tokens, `q` | four | `09_y` |\n")
    assert duplicates(text) == ["GAE"]
    assert untaught(text, {"04_x": "the critic and gae", "09_y": "credit"}) == ["forking tokens, `q`: not in 09_y"]
    assert untaught(text, {"04_x": "the critic"}) == ["GAE: not in 04_x", "GAE: not in 04_x",
                                                      "forking tokens, `q`: no notebook 09_y"]


def test_the_glossary_has_one_row_per_term():
    text = GLOSSARY.read_text()
    assert len(rows(text)) > 50, "the row pattern no longer matches the glossary's table"
    assert duplicates(text) == []


def test_every_taught_in_is_true():
    assert untaught(GLOSSARY.read_text(), chapter_texts()) == []
