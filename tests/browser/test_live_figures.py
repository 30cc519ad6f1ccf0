"""Live figures under stress, in JupyterLab in Chromium, beside the CPU burner (conftest.cpu_burner).

Six live figures are updated from a background thread much faster than they redraw (coalesced by ``LiveFigure``),
the page is reloaded in the middle, the figures are displayed again; after each round every view on the page must
be drawn, at the version its model holds, with the kernel's data (trace by trace). Then a lab plays, the page is
reloaded mid-run, and its curves must show the trainer's steps after the next step (the delay is printed).
"""

import json
import time

import pytest
from browser_drive import (
    append_and_run,
    box_state,
    kernel_eval,
    open_notebook,
    run_command,
    wait_for,
    wait_idle,
    widget_box,
)
from browser_expect import trace

pytestmark = pytest.mark.browser

URL = "lab/tree/fixtures/live.ipynb"
ROUNDS = 3

SETUP = """
import json, threading, time
import ipywidgets as widgets
import plotly.graph_objects as go
from rlnb.viz.backend import LiveFigure

def figure(i, r):
    xs = list(range(r + 1))
    return go.Figure(go.Scatter(x=xs, y=[float((k * (i + 1)) % 7) for k in xs], name=f"stress-{i}"))

figs = [LiveFigure(figure(i, 0), backend="widget") for i in range(6)]
pumped = [0]

def pump(rounds):
    for r in range(pumped[0] + 1, pumped[0] + rounds + 1):
        for i, f in enumerate(figs):
            f.update(figure(i, r))
        pumped[0] = r
        time.sleep(0.003)

def expected():
    print(json.dumps({f"stress-{i}": {"version": f.view.version, "pending": f.pending, "y": list(f.fig.data[0].y)}
                      for i, f in enumerate(figs)}))

widgets.VBox([f.view for f in figs])
"""

# every live figure on the open notebook's page: its state, versions and first trace
VIEWS = """() => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .rlnb-plotview')].map(v => {
  const p = v.querySelector('.js-plotly-plot');
  const t = p && Array.isArray(p.data) ? p.data[0] : null;
  return {state: v.dataset.rlnbState || null, drawn: v.dataset.rlnbVersion || null, latest: v.dataset.rlnbLatest || null,
          name: t ? t.name : null, y: t && t.y ? Array.from(t.y) : null, svg: !!(p && p.querySelector('svg.main-svg'))};
})"""


def mismatches(page) -> list[str]:
    """Every stress view that is not drawn with the kernel's current figure (empty when all are)."""
    want = json.loads(kernel_eval(page, "expected()"))
    views = [v for v in page.evaluate(VIEWS) if (v["name"] or "").startswith("stress-") or v["name"] is None]
    found = [] if views else ["no live figure on the page"]
    for k, v in enumerate(views):
        w = want.get(v["name"] or "")
        if w is None or w["pending"]:
            found.append(f"view {k}: {v['name']!r} not (yet) known to the kernel")
        elif not (v["svg"] and v["state"] == "drawn" and v["drawn"] == str(w["version"]) == v["latest"]):
            found.append(f"view {k} ({v['name']}): state {v['state']}, version {v['drawn']} drawn, {v['latest']} "
                         f"in its model, {w['version']} in the kernel")
        elif v["y"] != w["y"]:
            found.append(f"view {k} ({v['name']}): drawn {len(v['y'])} points, the kernel holds {len(w['y'])}")
    return found


def settle(page, what: str, timeout_s: float = 30) -> int:
    """Wait until every stress view shows the kernel's figure; the number of views."""
    last = []

    def ok():
        last[:] = mismatches(page)
        return not last

    try:
        wait_for(ok, timeout_s=timeout_s, every_s=0.5, what=what)
    except TimeoutError as err:
        raise AssertionError(f"{err}: {last}") from None
    return len(page.evaluate(VIEWS))


def reload(page) -> None:
    """Save (the outputs hold the widgets' ids), then reload the tab, as a learner presses F5."""
    run_command(page, "docmanager:save", timeout_s=120)
    open_notebook(page, page.url.split("?")[0])


def test_live_figures_survive_updates_reloads_and_redisplays(lab, page):
    open_notebook(page, lab.url(URL))
    append_and_run(page, SETUP)
    wait_idle(page, timeout_s=60)
    log = [f"first display: {settle(page, 'the first display to draw')} views"]
    for r in range(ROUNDS):
        # updates from a thread, far faster than the redraw rate, with a reload in the middle of them
        append_and_run(page, "t = threading.Thread(target=pump, args=(120,)); t.start()")
        time.sleep(1.0)
        reload(page)
        wait_for(lambda: kernel_eval(page, "print(t.is_alive())").strip() == "False", timeout_s=120,
                 what="the updates to finish")
        n = settle(page, f"round {r}: every view drawn after the reload")
        append_and_run(page, "widgets.VBox([f.view for f in figs])")  # a second display of the same figures
        wait_idle(page, timeout_s=60)
        m = settle(page, f"round {r}: every view drawn after displaying them again")
        assert m == n + 6, f"round {r}: {m} views after displaying 6 more, {n} before"
        log.append(f"round {r}: {kernel_eval(page, 'print(pumped[0])').strip()} updates each, {m} views drawn "
                   f"with the kernel's data")
    print("\n".join(log))


LAB = """
import rlnb
trainer = rlnb.Trainer.tiny("grpo", task="add", seed=0, prompts_per_step=2, num_generations=2)
lab = rlnb.viz.Lab(trainer)
lab
"""


def test_a_reload_mid_lab_run_shows_the_current_curves(lab, page):
    open_notebook(page, lab.url(URL))
    append_and_run(page, LAB)
    wait_idle(page, timeout_s=120)
    append_and_run(page, "lab.play()")
    steps = lambda: int(kernel_eval(page, "print(len(trainer.history))"))  # noqa: E731
    wait_for(lambda: steps() >= 3, timeout_s=120, what="the lab to play 3 steps")
    reload(page)
    box = wait_for(lambda: widget_box(page, "lab-dashboard"), timeout_s=60, what="the lab's dashboard after the reload")
    try:
        k0 = steps()
        wait_for(lambda: steps() > k0, timeout_s=60, what="the next step after the reload")
        t_step, k = time.monotonic(), steps()
        points = lambda: len(trace(box_state(box), "reward")["x"])  # noqa: E731
        wait_for(lambda: points() >= k, timeout_s=30, every_s=0.1, what=f"the curves to show step {k}")
        # the delay is printed, not asserted (no timed assertions: a busy CI machine is slower); the issue's "within
        # a second" was measured with it (0.25 s, and 0.89 s at load 12-14)
        print(f"lab: reloaded at step {k0}; step {k} drawn {time.monotonic() - t_step:.2f} s after the kernel had it")
    finally:
        kernel_eval(page, "lab.pause()")


SLOW = """
import time
from rlnb.viz.backend import figure_json
from rlnb.viz.plotview import PlotView

class SlowView(PlotView):  # a module that takes 3 s to load: anywidget gives up on its model after 2 s
    _esm = "await new Promise((r) => setTimeout(r, 3000));\\n" + str(PlotView._esm)

slow = SlowView(figure=figure_json(figure(0, 1))[0], version=1)
display(slow)
for r in range(2, 9):  # updates while the page waits for the module, and after anywidget gave up
    time.sleep(0.5)
    slow.show(figure_json(figure(0, r))[0], "")
"""


def wait_for_slow_view(page, want: int, points: int) -> None:
    """Wait until one view draws version ``want`` of the slow figure (``points`` points); on a timeout the error
    lists what every view on the page showed, so a failure says which step of the mend did not happen."""
    def drawn(v):
        return v["drawn"] == str(want) == v["latest"] and v["state"] == "drawn" and len(v["y"] or []) == points
    try:
        wait_for(lambda: any(drawn(v) for v in page.evaluate(VIEWS)), timeout_s=30,
                 what=f"the slow view to draw version {want}")
    except TimeoutError as err:
        seen = [{k: (len(v[k]) if k == "y" and v[k] else v[k]) for k in ("name", "state", "drawn", "latest", "y")}
                for v in page.evaluate(VIEWS)]
        mended = page.evaluate("() => !!globalThis.__rlnbMended")
        raise AssertionError(f"{err}; views (y: points): {seen}; mend in: {mended}; page errors: "
                             f"{page.rlnb_errors}") from err


def test_updates_reach_a_model_whose_module_loaded_late(lab, page):
    """anywidget drops every message to a model whose module took over 2 s to load (what a busy laptop showed as
    empty axes); rlnb's front end mends that, so the late view still draws the kernel's last update."""
    open_notebook(page, lab.url(URL))
    append_and_run(page, SETUP)
    append_and_run(page, SLOW)
    wait_idle(page, timeout_s=60)
    want = int(kernel_eval(page, "print(slow.version)"))
    wait_for_slow_view(page, want, points=9)
    assert not page.rlnb_errors, page.rlnb_errors  # the failure is mended, so reported as a warning only


def test_updates_reach_every_restored_model_after_a_reload_with_a_slow_module(lab, page):
    """After a reload every model is created at once, before any rlnb module has run, so none of them has the mend
    when it is created; the first module to run mends them all (a view that stays at the state it was restored
    with fails this test)."""
    open_notebook(page, lab.url(URL))
    append_and_run(page, SETUP)
    append_and_run(page, SLOW)
    wait_idle(page, timeout_s=60)
    reload(page)  # a fresh page: the mend is gone and every model is restored with the 3 s module
    append_and_run(page, "for r in range(9, 17):\n    time.sleep(0.5)\n    slow.show(figure_json(figure(0, r))[0], '')")
    wait_idle(page, timeout_s=60)
    want = int(kernel_eval(page, "print(slow.version)"))
    wait_for_slow_view(page, want, points=17)
