"""The two interactive checks: move a slider with the keyboard, and watch-then-interrupt a training run.

Each returns a list of failures (readable strings) instead of raising, so that one notebook reports
everything wrong with it at once, and its screenshot is still taken.
"""

from __future__ import annotations

import json
import re
import time

from browser_checks import problems, stream_text
from browser_drive import (
    append_and_run,
    box_state,
    describe,
    interrupt,
    kernel_eval,
    press_slider,
    wait_for,
    wait_idle,
    widget_box,
)
from browser_expect import Drive, Training, close, trace

CELL_RUNNING = """(i) => window.jupyterapp.shell.currentWidget.content.widgets[i].model.executionState === 'running'"""


def check_drive(page, d: Drive, log: list[str]) -> list[str]:
    """Move ``d.slider`` with the keyboard; what the widget shows must change and match the oracle."""
    box = widget_box(page, d.widget)
    if box is None:
        return [f"no widget of kind {d.widget!r} on the page (its box has the class rlnb-{d.widget})"]
    before = box_state(box)
    try:
        seen_before = d.observe(before)
    except (KeyError, ValueError) as err:
        return [f"{d.widget}: cannot read {d.what} before moving the slider: {err}"]
    try:
        press_slider(box, d.slider, list(d.keys))
    except LookupError as err:
        return [str(err)]
    probes: dict[str, object] = {}

    def expected(state):
        key = json.dumps(state["sliders"], sort_keys=True)
        if key not in probes:
            probes[key] = d.expected(state, lambda code: kernel_eval(page, code))
        return probes[key]

    def settled():
        state = box_state(box)
        try:
            seen = d.observe(state)
        except (KeyError, ValueError):
            return None
        return state if seen != seen_before and close(seen, expected(state), d.tol) else None

    try:
        after = wait_for(settled, timeout_s=30, what=f"{d.widget} to show the library's {d.what}")
    except TimeoutError as err:
        state = box_state(box)
        return [f"{d.widget}: moving {d.slider} {before['sliders'].get(d.slider)} -> "
                f"{state['sliders'].get(d.slider)} with {list(d.keys)}: {err}; shown before {seen_before!r}, "
                f"after {_safe(d.observe, state)!r}, expected {_safe(expected, state)!r}"]
    if after["sliders"][d.slider] == before["sliders"][d.slider]:
        return [f"{d.widget}: the keys did not move {d.slider} (still {after['sliders'][d.slider]})"]
    log.append(f"drive {d.widget}.{d.slider}: {before['sliders'][d.slider]} -> {after['sliders'][d.slider]}; "
               f"{d.what}: {seen_before!r} -> {d.observe(after)!r} (library: {expected(after)!r})")
    return []


def _safe(fn, *args):
    try:
        return fn(*args)
    except Exception as err:  # only for the failure message
        return f"<{type(err).__name__}: {err}>"


# whether the element shows in the notebook's scrolled area
IN_VIEW = """(el) => { const r = el.getBoundingClientRect();
  const p = (el.closest('.jp-WindowedPanel-outer') || document.documentElement).getBoundingClientRect();
  return r.bottom > p.top + 40 && r.top < p.bottom - 40; }"""


def check_training(page, t: Training, log: list[str], *, timeout_s: float = 90) -> list[str]:
    """Start a long run, see the dashboard gain points while it runs, interrupt, expect a clean stop."""
    dash = widget_box(page, t.dashboard)
    if dash is None:
        return [f"no dashboard (an rlnb widget of kind {t.dashboard!r}) on the page"]

    def points() -> int:
        return len(trace(box_state(dash), t.trace)["x"])

    start = points()
    cell = append_and_run(page, t.code)  # the new last cell scrolls the notebook down, as Run All leaves it
    seen, t0 = [start], time.monotonic()
    try:  # the run brings the dashboard into view
        wait_for(lambda: dash.evaluate(IN_VIEW), timeout_s=15, what="the dashboard to scroll into view")
    except TimeoutError as err:
        return [f"training started from the last cell: {err}"]
    # live: at least two redraws seen while the cell still runs, and min_new_points new points
    while len(seen) < 3 or seen[-1] < start + t.min_new_points:
        if time.monotonic() - t0 > timeout_s:
            return [f"the dashboard did not redraw twice and gain {t.min_new_points} points in {timeout_s:.0f} s "
                    f"of training ({seen})"]
        running = page.evaluate(CELL_RUNNING, cell)
        n = points()
        if not running:
            return [f"the training cell ended before the dashboard redrew twice with {t.min_new_points} new points "
                    f"({seen})"]
        if n != seen[-1]:
            seen.append(n)
        time.sleep(0.1)
    interrupt(page)
    wait_idle(page, timeout_s=60)
    found = [p for p in problems(describe(page)) if p.startswith(f"cell {cell}:")]
    out = stream_text(describe(page)[cell])
    m = re.search(r"Interrupted after step (\d+)", out)
    if not m:
        return found + [f"no clean-stop message after the interrupt; the cell printed {out[-300:]!r}"]
    step = int(m.group(1))
    try:
        wait_for(lambda: points() == step and box_state(dash)["values"].get("step") == step,
                 timeout_s=15, what=f"the dashboard to show step {step}")
    except TimeoutError:
        found.append(f"after the interrupt the trainer stopped after step {step}, but the dashboard shows "
                     f"{box_state(dash)['readout']!r} and {points()} points")
    after = append_and_run(page, t.after)
    wait_idle(page, timeout_s=60)
    text = stream_text(describe(page)[after])
    if t.after_expect.format(step=step) not in text:
        found.append(f"the cell after the interrupt printed {text!r}, expected {t.after_expect.format(step=step)!r}")
    log.append(f"training: dashboard points while running {seen}, interrupted after step {step}, "
               f"then {text.strip()!r}")
    return found


def screenshot(page, main: str | None, path) -> str:
    """Save the cell (code and output) holding the main widget, scrolled into view; the first figure's
    cell when ``main`` is None or not on the page; the viewport when there is no figure. Returns what
    was captured."""
    target, what = (widget_box(page, main), main) if main else (None, None)
    if target is None:
        target, what = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .js-plotly-plot").first, "first figure"
        if target.count() == 0:
            page.screenshot(path=str(path))
            return "viewport"
    cell = target.locator("xpath=ancestor::div[contains(concat(' ', @class, ' '), ' jp-Cell ')][1]")
    cell.scroll_into_view_if_needed()
    time.sleep(0.3)
    cell.screenshot(path=str(path))
    return f"the cell of {what}"
