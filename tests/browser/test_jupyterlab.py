"""End to end in a real browser: JupyterLab renders rlnb's notebooks and their widgets respond.

For each notebook (and the fixture ``fixtures/widgets.ipynb``): open it in headless Chromium, run all
cells in smoke mode, then check that no output is an error, every widget and figure rendered and reads
(``browser_readable``: axis titles, labels not raw keys, short numbers, tables and outputs; ``browser_contrast``:
text that stays readable in the dark theme), the page
shows at least the expected sliders and figures, one slider moved with the keyboard makes the widget show
what the library computes, and (start-here) the dashboard updates while training runs and a kernel
interrupt stops it cleanly. A screenshot of each notebook's main widget goes to
``test-artifacts/screenshots/<notebook>.png``, the page's description to ``test-artifacts/browser/``.

Run: ``pytest -m browser -ra`` (``/usr/bin/chromium`` and ``pip install -e '.[browser]'``).
"""

import json
import os
import time

import pytest
from browser_checks import counts, problems
from browser_contrast import dark_theme_problems
from browser_drive import describe, describe_settled, open_notebook, run_all, shutdown_kernel, wait_idle
from browser_expect import EXPECT
from browser_lab import NOTEBOOKS
from browser_readable import readability_problems
from browser_scenarios import check_drive, check_training, screenshot
from browser_scenarios_lab import check_lab

pytestmark = pytest.mark.browser

CASES = [("fixtures", "widgets.ipynb")] + [("notebooks", p.name) for p in NOTEBOOKS]
HERE = CASES[0::2]
# tests/browser/soak.py: Run All and its checks only (the drives and the dark pass add nothing to an undrawn count)
SOAK = os.environ.get("RLNB_BROWSER_SOAK") == "1"  # the other half is in test_jupyterlab_more.py: `make test`'s two workers take one file each


def summary_of_page(cells) -> str:
    """What the page shows, to write a missing EXPECT entry from."""
    doms = [o["dom"] for c in cells for o in c["outputs"] if o.get("dom")]
    explorers = [e["title"] for d in doms for e in d["explorers"]]
    sliders = [s["name"] for d in doms for s in d["sliders"]]
    return f"explorers/dashboards {explorers}, sliders {sliders}, counts {counts(cells)}"


def check_expectations(page, name, expect, cells, log, shots=None) -> list[str]:
    """Enough sliders and figures; the slider drive; the training run (start-here)."""
    failures = []
    c = counts(cells)
    if c["sliders"] < expect.min_sliders or c["plots"] < expect.min_plots:
        failures.append(f"expected at least {expect.min_sliders} sliders and {expect.min_plots} drawn figures, "
                        f"the page shows {c['sliders']} and {c['plots']}")
    if expect.drive is not None:
        failures += check_drive(page, expect.drive, log)
    elif not expect.no_drive:
        failures.append(f"EXPECT[{name!r}] has neither a drive nor a reason for having none (no_drive)")
    if expect.training is not None:
        failures += check_training(page, expect.training, log)
    if expect.lab:
        failures += check_lab(page, log, shots=shots)
    return failures


def run_and_describe(page, expect) -> tuple[dict, list[dict]]:
    """Run all cells, wait for the kernel, and describe the page once its figures had time to draw."""
    ran = run_all(page, timeout_s=expect.timeout_s if expect else 240)
    wait_idle(page, timeout_s=60)
    return ran, describe_settled(page)


def undrawn(cells) -> tuple[int, int]:
    """(figures on the page without a drawing or behind their model, figures on the page)."""
    found = [p for p in problems(cells) if "has no drawing" in p or "is behind" in p]
    total = sum(len(o["dom"]["plots"]) for c in cells for o in c["outputs"] if o.get("dom"))
    return len(found), total


@pytest.mark.parametrize("folder,name", HERE, ids=[f"{f}/{n}" for f, n in HERE])
def test_notebook_in_jupyterlab(lab, page, artifacts, folder, name):
    t0 = time.monotonic()
    expect = EXPECT.get(name)
    stem = name.removesuffix(".ipynb") if folder == "notebooks" else f"fixture-{name.removesuffix('.ipynb')}"
    open_notebook(page, lab.url(f"lab/tree/{folder}/{name}"))
    t_open = time.monotonic() - t0
    ran, cells = run_and_describe(page, expect)
    log = []
    failures = problems(cells) + readability_problems(cells)
    failures += [f"uncaught error in the page: {e}" for e in page.rlnb_errors]
    n_errors = len(page.rlnb_errors)
    if not ran.get("ok"):
        failures.append(f"run-all did not complete: {ran}")
    n_undrawn, n_figures = undrawn(cells)
    log.insert(0, f"{name}: opened in {t_open:.0f} s, ran all cells in {time.monotonic() - t0 - t_open:.0f} s; "
                  f"{summary_of_page(cells)}; undrawn figures: {n_undrawn} of {n_figures}")
    with open(artifacts / "browser" / "undrawn.jsonl", "a") as f:  # `make browser-soak` adds these up per run
        f.write(json.dumps({"notebook": name, "undrawn": n_undrawn, "figures": n_figures}) + "\n")
    try:
        if expect is None:
            failures.append(f"{name} has no entry in EXPECT (tests/browser/browser_expect.py); the page shows "
                            f"{summary_of_page(cells)}")
        elif not SOAK:
            failures += check_expectations(page, name, expect, cells, log, shots=artifacts / "screenshots")
        if not SOAK:
            failures += dark_theme_problems(page)  # last: the drives above read the light page
    finally:  # after the checks (the dashboard has its longer run), and even when one of them raised
        shot = artifacts / "screenshots" / f"{stem}.png"
        log.append(f"screenshot of {screenshot(page, expect.main if expect else None, shot)}: {shot}")
        (artifacts / "browser" / f"{stem}.json").write_text(json.dumps(describe(page), indent=1))
        shutdown_kernel(page)
        log.append(f"total {time.monotonic() - t0:.0f} s; console errors: {page.rlnb_console[:5]}")
        print("\n".join(log))
    failures += [f"uncaught error in the page while driving it: {e}" for e in page.rlnb_errors[n_errors:]]
    assert not failures, "\n".join(failures)
