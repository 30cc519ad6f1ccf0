"""The lab's check in JupyterLab: press Play, move beta while it trains, run another cell, press Pause; then raise
mu and see the eps controls enable, press Fork, move beta in the fork, play, and see every panel draw two curves
whose legend groups are labelled by what differs ("beta 0.02 from step 7"); screenshots of the lab with the fork.

Returns a list of failures (readable strings) like the other scenarios. Widgets are found by stable hooks:
``data-rlnb-inert`` (the controls that cannot act), trace ``meta`` (``fork/<key>``), legend group titles.
"""

from __future__ import annotations

import time

from browser_checks import stream_text
from browser_drive import append_and_run, box_state, describe, kernel_eval, press_slider, wait_for, widget_box

INERT = "(b) => [...b.querySelectorAll('[data-rlnb-inert]')].flatMap(e => e.dataset.rlnbInert.split(' '))"
# per trace: meta, number of points, and its legend group's title (plotly shows it on the group's first trace)
TRACES = """(b) => { const p = b.querySelector('.js-plotly-plot'); if (!p || !p.data) return [];
  return p.data.map(t => ({meta: t.meta || '', n: t.x ? t.x.length : 0, group: t.legendgroup || '',
                           title: (t.legendgrouptitle && t.legendgrouptitle.text) || ''})); }"""
SHAPES = "(b) => { const p = b.querySelector('.js-plotly-plot'); return p && p.layout ? (p.layout.shapes || []).length : -1; }"


def status(box) -> tuple[int, str, str, dict]:
    """The lab's status line through its hooks: step, state ("playing", "paused"), its text (for messages) and all
    of its values (``changes``: knob changes so far, ``fork_since``: the step an open fork was copied at)."""
    s = box_state(box)
    step = s["values"].get("step")
    return (-1 if step is None else int(step)), s.get("state") or "", s["readout"], s["values"]


def click(box, name: str) -> None:
    """Press the lab's button ``name`` ("play", "fork", "close-fork") by its hook class."""
    box.locator(f"button.rlnb-button-{name}").first.click()


THEME = "async (name) => { await window.jupyterapp.commands.execute('apputils:change-theme', {theme: name}); }"


def shoot(page, box, shots, log: list[str]) -> None:
    """Screenshots of the lab while it plays, in JupyterLab's light and dark themes (figures follow)."""
    cell = box.locator("xpath=ancestor::div[contains(concat(' ', @class, ' '), ' jp-Cell ')][1]")
    for theme, lab_theme in (("light", "JupyterLab Light"), ("dark", "JupyterLab Dark")):
        page.evaluate(THEME, lab_theme)
        kernel_eval(page, f"rlnb.viz.set_theme({theme!r})")
        time.sleep(1.5)
        box.scroll_into_view_if_needed()
        path = shots / f"13_the_lab_fork_{theme}.png"
        cell.screenshot(path=str(path))
        log.append(f"lab screenshot ({theme}, playing): {path}")
    page.evaluate(THEME, "JupyterLab Light")
    kernel_eval(page, "rlnb.viz.set_theme('light')")


def check_lab(page, log: list[str], *, timeout_s: float = 120, shots=None) -> list[str]:
    box = widget_box(page, "lab")
    if box is None:
        return ["no lab on the page (an rlnb widget of kind 'lab')"]
    start, changes0 = status(box)[0], status(box)[3].get("changes", 0)
    click(box, "play")
    try:
        wait_for(lambda: status(box)[1] == "playing" and status(box)[0] >= start + 2, timeout_s=timeout_s,
                 what="the lab to play and its step count to advance by 2")
    except TimeoutError as err:
        return [f"after Play: {err}; status {status(box)[2]!r}"]
    playing_at = status(box)[0]
    beta0, shapes0 = float(kernel_eval(page, "print(trainer.knob('beta'))")), box.evaluate(SHAPES)
    press_slider(box, "beta", ["ArrowRight", "ArrowRight"])
    failures = []
    try:
        # each key press may land at its own step boundary (0.05 -> 0.055 -> 0.06): any beta change counts
        wait_for(lambda: status(box)[3].get("changes", 0) > changes0 and box.evaluate(SHAPES) > shapes0,
                 timeout_s=timeout_s, what="the status to report the beta change and the curves to mark it")
    except TimeoutError as err:
        failures.append(f"moving beta while playing: {err}; status {status(box)[2]!r}, "
                        f"{box.evaluate(SHAPES)} shapes on the dashboard")
    cell = append_and_run(page, "print('while playing:', trainer.step_count)")
    try:
        wait_for(lambda: "while playing:" in stream_text(describe(page)[cell]), timeout_s=30,
                 what="another cell to run while the lab plays")
        if status(box)[1] != "playing":
            failures.append(f"the lab stopped playing when another cell ran: {status(box)[2]!r}")
    except TimeoutError as err:
        failures.append(f"{err} (the kernel is blocked while the lab plays)")
    click(box, "pause")
    try:
        wait_for(lambda: status(box)[1] == "paused", timeout_s=30, what="the lab to pause")
    except TimeoutError as err:
        return failures + [f"after Pause: {err}; status {status(box)[2]!r}"]
    stopped = status(box)[0]
    time.sleep(3)
    if status(box)[0] != stopped:
        failures.append(f"the step count went on after Pause: {stopped} -> {status(box)[0]}")
    beta1 = float(kernel_eval(page, "print(trainer.knob('beta'))"))
    betas = kernel_eval(page, "print(sorted({h['hp/beta'] for h in trainer.history}))").strip()
    if not beta1 > beta0 or repr(beta1) not in betas:
        failures.append(f"beta {beta0} -> {beta1} with the slider; the history's hp/beta values {betas}")
    log.append(f"lab: step {start} -> {playing_at} playing, beta {beta0} -> {beta1}, {status(box)[2]!r} after Pause; "
               f"hp/beta seen {betas}")
    return failures + check_fork(page, box, log, timeout_s=timeout_s, shots=shots)


def two_curves(box, since: int) -> dict | None:
    """The reward curve of each branch and their legend titles, once the fork's reaches 2 steps past ``since`` (it
    shares the steps before the fork with the main run); else None."""
    traces = box.evaluate(TRACES)
    main = next((t for t in traces if t["meta"] == "reward"), None)
    fork = next((t for t in traces if t["meta"] == "fork/reward"), None)
    if main is None or fork is None or fork["n"] < since + 2:
        return None
    titles = {t["group"]: t["title"] for t in traces if t["title"]}
    return {"main": titles.get("main", ""), "fork": titles.get("fork/", ""), "fork points": fork["n"]}


def check_fork(page, box, log: list[str], *, timeout_s: float, shots=None) -> list[str]:
    """Paused lab: raise mu (the eps controls enable), Fork, move beta in the fork, Play, two labelled curves."""
    if not {"eps_low", "eps_high"} <= set(box.evaluate(INERT)):
        return [f"at mu = 1 the eps controls should be marked inert; data-rlnb-inert {box.evaluate(INERT)}"]
    press_slider(box, "num_iterations", ["ArrowRight"])
    try:
        wait_for(lambda: not {"eps_low", "eps_high"} & set(box.evaluate(INERT)), timeout_s=30,
                 what="the eps controls to enable once mu = 2")
    except TimeoutError as err:
        return [f"raising mu: {err}; inert {box.evaluate(INERT)}"]
    click(box, "fork")
    try:
        wait_for(lambda: "fork_since" in status(box)[3], timeout_s=30, what="the status line to report the fork")
    except TimeoutError as err:
        return [f"after Fork: {err}; status {status(box)[2]!r}"]
    since = status(box)[0]
    press_slider(box, "beta", ["ArrowRight", "ArrowRight"])  # "knobs for" is on the fork after Fork
    click(box, "play")
    failures = []
    try:
        curves = wait_for(lambda: two_curves(box, since), timeout_s=timeout_s,
                          what="the fork's curves to draw 2 steps past the fork")
        if not (curves["main"] and "beta" in curves["fork"] and "from step" in curves["fork"]):
            failures.append(f"the two branches' legend groups are not labelled by what differs: {curves}")
    except TimeoutError as err:
        curves = None
        failures.append(f"after Fork and beta in the fork: {err}; status {status(box)[2]!r}")
    if shots is not None and status(box)[1] == "playing":
        shoot(page, box, shots, log)
    click(box, "pause")
    wait_for(lambda: status(box)[1] == "paused", timeout_s=30, what="the lab to pause")
    betas = kernel_eval(page, "b = lab.loop.fork_branch; print(sorted({h['hp/beta'] for h in lab.trainer.history[b.since:]}),"
                              " sorted({h['hp/beta'] for h in b.history[b.since:]}))").strip()
    main_b, fork_b = betas.split("] [")
    if main_b.strip("[") == fork_b.strip("]"):
        failures.append(f"beta moved in the fork should differ from the main run's after the fork: {betas}")
    log.append(f"lab fork: curves {curves}, hp/beta after the fork (main, fork) {betas}")
    return failures
