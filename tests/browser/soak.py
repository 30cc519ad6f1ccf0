"""The browser test of every notebook several times in a row, beside the CPU burner (``make browser-soak``).

    python tests/browser/soak.py --runs 10

Each run is one pytest of ``test_jupyterlab.py`` and ``test_jupyterlab_more.py`` with ``RLNB_BROWSER_SOAK=1`` (Run All
and the page's problems, without the slider drives and the dark pass); each notebook's test appends its count of
undrawn live figures to ``test-artifacts/browser/undrawn.jsonl``. Prints one line a run (notebooks, undrawn
figures of all figures, pytest's exit code and time) and exits non-zero if any run had an undrawn figure or failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
COUNTS = REPO / "test-artifacts" / "browser" / "undrawn.jsonl"
TESTS = ["tests/browser/test_jupyterlab.py", "tests/browser/test_jupyterlab_more.py"]


def one_run(i: int, workers: int) -> tuple[int, int, int, int]:
    """(undrawn figures, figures, pytest's exit code, notebooks) of run ``i``; its output in test-artifacts/soak-<i>.log."""
    COUNTS.unlink(missing_ok=True)
    log = REPO / "test-artifacts" / f"soak-{i}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        rc = subprocess.call([sys.executable, "-m", "pytest", "-q", "-m", "browser", "-n", str(workers),
                              "--dist", "loadfile", *TESTS], cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                             env={**os.environ, "RLNB_BROWSER_SOAK": "1"})
    rows = [json.loads(line) for line in COUNTS.read_text().splitlines()] if COUNTS.exists() else []
    return sum(r["undrawn"] for r in rows), sum(r["figures"] for r in rows), rc, len(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error(f"--runs: expected at least 1, got {args.runs}")
    bad = 0
    for i in range(1, args.runs + 1):
        t0 = time.monotonic()
        undrawn, figures, rc, notebooks = one_run(i, args.workers)
        print(f"run {i}: {notebooks} notebooks, undrawn figures {undrawn} of {figures}, pytest exit {rc}, "
              f"{time.monotonic() - t0:.0f} s", flush=True)
        bad += bool(undrawn or rc or not notebooks)
    print(f"{args.runs - bad} of {args.runs} runs clean")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
