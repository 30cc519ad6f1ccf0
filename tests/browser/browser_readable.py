"""Is what a learner sees readable? The verdict on a described page (``browser_checks.DESCRIBE``).

What counts as unreadable (issue 22): a figure axis without a title; a legend entry, axis title or subplot title
that is a raw metric key (``clip_ratio/low_mean``) where the course has a human label; a printed number with more
than ``MAX_DIGITS`` significant digits outside code; a table of more than ``MAX_ROWS`` visible rows; a progress bar
left red; a text output longer than ``MAX_LINES`` lines.

``MAX_ROWS`` is 16, not the 12 first asked for: a reference table with one row per recipe of the zoo (13) reads as a
whole and is better not folded; a dump of every row of a batch (64) does not.
"""

from __future__ import annotations

import re

from rlnb.viz.figures.theme import METRIC_LABELS

MAX_DIGITS = 6   # 0.1235 and 1234.5 read; 0.17999999999999994 does not
MAX_ROWS = 16   # data rows
MAX_LINES = 60

# a decimal number standing alone (not part of a version "2.13.0", a name "x1.5b" or a longer number)
NUMBER = re.compile(r"(?<![\w.])-?(\d+)\.(\d+)(?:[eE][-+]?\d+)?(?![\w.]*\d)")
ARXIV = re.compile(r"arXiv[: ]*\d{4}\.\d{4,5}(v\d+)?", re.IGNORECASE)  # a paper's number, not a measurement
# a history key: lower-case words joined by "/" (TRL's names: clip_ratio/low_mean, rewards/correct/mean)
KEY_SHAPE = re.compile(r"^[a-z][a-z0-9_]*(/[a-z0-9_@.]+)+$")


def is_raw_key(name: str) -> bool:
    """A metric key shown as it is stored instead of by its label (``metric_label`` knows a better one)."""
    name = name.strip()
    if name in METRIC_LABELS:  # plain words ("reward", "entropy") read as they are; snake_case keys do not
        return METRIC_LABELS[name] != name and ("_" in name or "/" in name)
    return name.startswith("hp/") or bool(KEY_SHAPE.match(name))


def long_numbers(text: str) -> list[str]:
    """Numbers printed with more than ``MAX_DIGITS`` significant digits."""
    out = []
    for m in NUMBER.finditer(ARXIV.sub("arXiv", text)):
        digits = (m.group(1) + m.group(2)).lstrip("0")
        if len(digits) > MAX_DIGITS:
            out.append(m.group(0))
    return out


def _figure_problems(where: str, k: int, plot: dict) -> list[str]:
    found = []
    untitled = sorted({a["id"] for a in plot.get("axes", []) if not a["title"].strip()})
    if untitled:
        found.append(f"{where}: figure {k}: axis {', '.join(untitled)} has no title")
    shown = [*plot.get("legend", []), *(a["title"] for a in plot.get("axes", [])), *plot.get("annotations", [])]
    raw = sorted({s for s in shown if is_raw_key(s)})
    if raw:
        found.append(f"{where}: figure {k}: raw metric keys shown: {raw}")
    return found


def _output_problems(where: str, dom: dict) -> list[str]:
    found = []
    for k, plot in enumerate(dom.get("plots", [])):
        found += _figure_problems(where, k, plot)
    numbers = long_numbers(dom.get("prose", ""))
    if numbers:
        found.append(f"{where}: {len(numbers)} numbers with more than {MAX_DIGITS} digits, e.g. {numbers[:3]}")
    big = [n for n in dom.get("tables", []) if n > MAX_ROWS]
    if big:
        found.append(f"{where}: a table of {max(big)} visible rows (at most {MAX_ROWS} read on a page)")
    if dom.get("redBars"):
        found.append(f"{where}: a progress bar left red")
    if dom.get("lines", 0) > MAX_LINES:
        found.append(f"{where}: {dom['lines']} lines of output (at most {MAX_LINES})")
    return found


def readability_problems(cells: list[dict]) -> list[str]:
    """Everything a learner could not read on a described page, as readable strings."""
    return [p for c in cells for out in c["outputs"] if out.get("dom")
            for p in _output_problems(f"cell {c['index']}", out["dom"])]
