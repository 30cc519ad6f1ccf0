"""Small helpers the notebooks share: smoke mode, budgets, and claims that are checked where they are made.

The chapters' own measuring helpers live beside this face: ``rlnb.notebook.critic`` (PPO's critic against Monte-Carlo
values, GAE's trade-off; chapter 04 and the GAE explorer) and ``rlnb.notebook.memory`` (what PPO's four models cost;
chapter 04). Training-level studies are ``rlnb.studies``; benchmarks ``rlnb.bench``.

``RLNB_SMOKE=1`` (set by the test suite) shrinks every notebook to seconds; without it each notebook runs
its full laptop-sized experiment.
"""

from __future__ import annotations

import os
import time


def smoke() -> bool:
    """True when ``RLNB_SMOKE=1``: notebooks run their seconds-long version (CI)."""
    return os.environ.get("RLNB_SMOKE", "0").strip().lower() in ("1", "true", "yes")


def budget(full, smoke_value):
    """``full`` normally, ``smoke_value`` in smoke mode: ``steps = budget(150, 3)``."""
    return smoke_value if smoke() else full


def expect(claim: str, ok: bool, detail: str = "") -> None:
    """Print a claim with its measured evidence and fail loudly if it does not hold. Returns nothing, so a
    cell that ends with a check shows the check, not a stray ``True``.

    >>> expect("2 + 2 is 4", 2 + 2 == 4, "measured 4")
    ✓ 2 + 2 is 4 — measured 4
    >>> expect("2 + 2 is 5", 2 + 2 == 5, "measured 4")
    Traceback (most recent call last):
    AssertionError: ✗ 2 + 2 is 5 — measured 4
    """
    if not ok:
        raise AssertionError(f"✗ {claim} — {detail}")
    print(f"✓ {claim}" + (f" — {detail}" if detail else ""))


class Stopwatch:
    """``sw = Stopwatch()`` at the top of a notebook, ``sw.report()`` at the end: the runtime to expect."""

    def __init__(self):
        self.t0 = time.perf_counter()

    def report(self) -> float:
        s = time.perf_counter() - self.t0
        print(f"This notebook ran in {s:.0f} s ({'smoke' if smoke() else 'full'} mode).")
        return s


RUNTIMES = "docs/results/runtimes.json"  # written by scripts/measure_runtimes.py (full mode, one machine)


def course_path(rel: str, *, cwd=None):
    """``rel`` (e.g. ``"docs/results/beta.json.gz"``) in the course folder: beside the package in a clone (an editable
    install), else in the current folder or one above it (rlnb installed from a wheelhouse into site-packages, the
    notebooks run from the copied course's ``notebooks/``). Where it is in neither, the clone's path, so the error
    that follows names where the file belongs.

    >>> course_path("rlnb/notebook/__init__.py").parent.name
    'notebook'
    """
    from pathlib import Path

    beside = Path(__file__).resolve().parents[2] / rel  # rlnb/notebook/__init__.py -> the clone
    if beside.exists():
        return beside
    here = Path.cwd() if cwd is None else Path(cwd)
    found = [f / rel for f in (here, *here.parents) if (f / rel).exists()]
    return found[0] if found else beside


def runtime_line(name: str, *, path=None) -> str:
    """The "Runtime / result to expect" line of notebook ``name`` (e.g. ``"00_start_here"``), formatted from the
    runtime results file so no notebook types a runtime by hand.

    >>> runtime_line("nope", path="/nonexistent.json")
    'Runtime: not measured yet in full mode (run `python scripts/measure_runtimes.py nope`).'
    """
    import json
    from pathlib import Path

    p = Path(path) if path is not None else course_path(RUNTIMES)
    entry = json.loads(p.read_text()).get(name) if p.is_file() else None
    if not entry:
        return f"Runtime: not measured yet in full mode (run `python scripts/measure_runtimes.py {name}`)."
    busy = entry["load"] >= 2 and entry.get("niced_share", 1) > 0.2  # other work competed for the cores
    load = f" under load {entry['load']:.1f}" if busy else ""
    return (f"Runtime: {entry['seconds']:.0f} s in full mode, measured {entry['date']} on {entry['machine']}{load}; "
            "a few seconds with `RLNB_SMOKE=1`.")
