"""No measured number is typed into a chapter's markdown (../shared/course.md, "Numbers and text"): prose that
carries a measured number is printed by a cell, so the text cannot go stale.

What counts as typed: a decimal (``0.745``, ``.23``), a percentage (``45 %``), a multiple (``4x``) or a number
with a unit of time or size (``140 s``, ``3 min``, ``306 MB``), outside ``$maths$`` and ``code``. Constants
that define a setting rather than report a measurement are allowed per chapter in ``ALLOWED``.
"""

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"

# Chapters held to the rule (the course rewrite adds each chapter here as it lands).
CHAPTERS: list[str] = ["00", "01", "02", "03", "04", "05", "06", "07", "08", "09", "10", "11", "12", "13", "14", "15",
                        "16"]

# Per chapter: typed numbers that are settings or definitions, not measurements (exact strings as found).
ALLOWED: dict[str, set[str]] = {
    # the decision rule's settings: its confidence level, the power its seeds aim at, an activity check's threshold
    "06": {"95 %"}, "10": {"95 %", "80 %", "1 %"}, "12": {"95 %"}, "16": {"95 %"},
    "07": {"2 x", "0.5", "0.2"},   # two live runs; beta values to set (settings, not results)
    "11": {"10x", "30x"},          # the learning rates tried, as multiples of the healthy one (fixed in advance)
}

_MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]*\$", re.S)
_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)
_HTML = re.compile(r"<[^>\n]+>")
_URL = re.compile(r"https?://\S+|\b\d{4}\.\d{4,5}\b")  # links and arXiv ids are not measurements
_NUMBER = re.compile(
    r"(?<![\w.])\d+(?:\.\d+)?\s?(?:%|x(?![\w])|×)"                             # a percentage or a multiple
    r"|(?<![\w.])\d+(?:\.\d+)?\s?(?:s|ms|sec|seconds|min|minutes|h|hours|MB|GB|MiB|GiB|KB)(?![\w])"
    r"|(?<![\w.])(?:\d+\.\d+|\.\d+)(?![\w.])"                                  # a plain decimal
)


def typed_numbers(markdown: str) -> list[str]:
    """The measured-looking numbers typed in ``markdown``, outside maths, code and HTML tags.

    >>> typed_numbers("greedy 0.20 -> 0.32 in 140 s, $\\\\epsilon = 0.2$ and `lr=1e-4`, 45 % of tokens, 4x faster")
    ['0.20', '0.32', '140 s', '45 %', '4x']
    >>> typed_numbers("G = 8 completions per prompt, 3-digit addition, step 10")
    []
    """
    text = _URL.sub(" ", _HTML.sub(" ", _CODE.sub(" ", _MATH.sub(" ", markdown))))
    return [m.group(0) for m in _NUMBER.finditer(text)]


def chapter(prefix: str) -> Path:
    found = sorted(NOTEBOOKS.glob(f"{prefix}_*.ipynb"))
    assert found, f"no notebook {prefix}_*.ipynb"
    return found[0]


def test_the_counter_catches_each_kind():
    assert typed_numbers("rose from 0.05 to 0.23") == ["0.05", "0.23"]
    assert typed_numbers("took 3 min and 12 s") == ["3 min", "12 s"]
    assert typed_numbers("clipped 1.3 % of tokens, 200x more") == ["1.3 %", "200x"]
    assert typed_numbers("memory 306 MB") == ["306 MB"]
    assert typed_numbers("$\\beta = 0.04$ and ```\nx = 0.5\n```") == []
    assert typed_numbers("<span style='width: 0.5em'>x</span>") == []
    assert typed_numbers("DAPO (arXiv 2503.14476, [paper](https://arxiv.org/abs/2503.14476v2))") == []


@pytest.mark.parametrize("prefix", CHAPTERS)
def test_no_measured_number_typed_in_markdown(prefix):
    nb = json.loads(chapter(prefix).read_text())
    allowed = ALLOWED.get(prefix, set())
    typed = [(i, n) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown"
             for n in typed_numbers("".join(c["source"])) if n not in allowed]
    assert not typed, (f"{chapter(prefix).name}: numbers typed in markdown (print them from a cell, or add a "
                       f"setting to ALLOWED): {typed[:20]}")
