"""Driving an open notebook in JupyterLab through ``window.jupyterapp`` (``--LabApp.expose_app_in_browser``).

Commands are started without returning their promise to Playwright: ``notebook:run-all-cells`` resolves
only when every cell has run, and an awaited evaluate would block the test (and its timeouts) until then.
Their outcome is parked on ``window`` and polled instead.
"""

from __future__ import annotations

import json
import time

from browser_checks import DESCRIBE, parse_readout, problems

PANEL = "window.jupyterapp.shell.currentWidget"
KERNEL = f"{PANEL}.sessionContext.session?.kernel"

OPEN_READY = f"""() => {{ const w = window.jupyterapp && {PANEL};
  return !!(w && w.sessionContext && w.context && w.context.isReady && {KERNEL} && {KERNEL}.status === 'idle'); }}"""

START = """(command) => { window.__rlnb = window.__rlnb || {}; window.__rlnb[command] = null;
  window.jupyterapp.commands.execute(command).then(
    (r) => { window.__rlnb[command] = {ok: r === undefined ? true : r}; },
    (e) => { window.__rlnb[command] = {error: String(e)}; }); }"""

DONE = "(command) => window.__rlnb && window.__rlnb[command]"

APPEND_CELL = f"""async (code) => {{ const nb = {PANEL}.content;
  nb.activeCellIndex = nb.widgets.length - 1; nb.mode = 'command';
  await window.jupyterapp.commands.execute('notebook:insert-cell-below');
  nb.activeCell.model.sharedModel.setSource(code);
  return nb.activeCellIndex; }}"""

# runs code in the notebook's kernel outside any cell (nothing is shown); returns stdout and the error
KERNEL_EVAL = f"""async (code) => {{ const k = {KERNEL};
  let out = '', error = null;
  const future = k.requestExecute({{code, silent: false, store_history: false}});
  future.onIOPub = (msg) => {{ const t = msg.header.msg_type;
    if (t === 'stream') out += msg.content.text;
    else if (t === 'error') error = msg.content.ename + ': ' + msg.content.evalue; }};
  await future.done;
  return {{out, error}}; }}"""

EXECUTING = f"""() => {{ const nb = {PANEL}.content;
  return nb.widgets.some(c => c.model.type === 'code' && c.model.executionState === 'running')
      || {KERNEL}.status !== 'idle'; }}"""


def open_notebook(page, url: str, *, timeout_s: float = 120) -> None:
    """Open a notebook alone (``reset``: the server remembers the last page's open tabs and would reopen
    them) and wait for its kernel to be idle."""
    page.goto(url + ("&" if "?" in url else "?") + "reset")
    page.wait_for_function(OPEN_READY, timeout=timeout_s * 1000, polling=250)


def run_command(page, command: str, *, timeout_s: float) -> dict:
    """Start a JupyterLab command and wait (polling, not awaiting its promise) for its result."""
    page.evaluate(START, command)
    page.wait_for_function(DONE, arg=command, timeout=timeout_s * 1000, polling=250)
    return page.evaluate(DONE, command)


def run_all(page, *, timeout_s: float) -> dict:
    """Run all cells; returns ``{ok: bool}`` (False when a cell failed and the rest were skipped)."""
    return run_command(page, "notebook:run-all-cells", timeout_s=timeout_s)


def wait_idle(page, *, timeout_s: float, settle_s: float = 0.5) -> None:
    """Wait until no cell runs and the kernel is idle, twice ``settle_s`` apart (widget messages settle)."""
    deadline = time.monotonic() + timeout_s
    quiet = 0
    while quiet < 2:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the notebook was still running after {timeout_s:.0f} s")
        quiet = quiet + 1 if not page.evaluate(EXECUTING) else 0
        time.sleep(settle_s)


def describe(page) -> list[dict]:
    return page.evaluate(DESCRIBE, ".jp-Notebook")


def describe_settled(page, *, timeout_s: float = 15) -> list[dict]:
    """The page's description once nothing is left to render: figures draw and widget views load a moment
    after the kernel is idle. Gives up after ``timeout_s`` (a broken widget never settles) and returns the
    last description."""
    deadline = time.monotonic() + timeout_s
    while True:
        cells = describe(page)
        if not problems(cells) or time.monotonic() > deadline:
            return cells
        time.sleep(0.5)


def kernel_eval(page, code: str) -> str:
    """stdout of ``code`` run in the notebook's kernel (RuntimeError with the error if it raised)."""
    res = page.evaluate(KERNEL_EVAL, code)
    if res["error"]:
        raise RuntimeError(f"kernel probe {code!r} failed: {res['error']}")
    return res["out"]


def append_and_run(page, code: str) -> int:
    """Add a cell with ``code`` at the end of the notebook and start it (not waiting); its index."""
    index = page.evaluate(APPEND_CELL, code)
    page.evaluate(START, "notebook:run-cell")
    return index


def interrupt(page, *, timeout_s: float = 30) -> dict:
    return run_command(page, "kernelmenu:interrupt", timeout_s=timeout_s)


def shutdown_kernel(page) -> None:
    page.evaluate(f"async () => {{ await {PANEL}.sessionContext.shutdown(); }}")


# --- one widget on the page -----------------------------------------------------------------------------

# marks the first rlnb widget of kind `hook` (its class rlnb-<hook>, rlnb.viz.hooks) with data-rlnb-box=`tag`;
# false when none. Never by wording: a better title or label must not break the test.
BOX = f"""([hook, tag]) => {{ const box = {PANEL}.content.node.querySelector(`.rlnb-widget.rlnb-${{hook}}`);
  if (box) box.setAttribute('data-rlnb-box', tag);
  return !!box; }}"""

# marks the control of knob `name` (class rlnb-knob-<name>) inside the marked box with data-rlnb-slider=`tag`
SLIDER = """([boxTag, name, tag]) => { const box = document.querySelector(`[data-rlnb-box="${boxTag}"]`);
  const s = box.querySelector(`.rlnb-knob-${name}`);
  if (s) s.setAttribute('data-rlnb-slider', tag);
  return !!s; }"""

STATE = """(box) => { const plot = box.querySelector('.js-plotly-plot');
  const ro = box.querySelector('code.rlnb-readout');
  const layoutTitle = plot && plot.layout && plot.layout.title;
  const knob = (s) => [...s.classList].find(c => c.startsWith('rlnb-knob-')).slice('rlnb-knob-'.length);
  return {readout: ro ? ro.textContent.trim() : '', exact: ro ? ro.dataset.rlnbValues || null : null,
          state: ro ? ro.dataset.rlnbState || null : null,
          title: layoutTitle ? (typeof layoutTitle === 'string' ? layoutTitle : layoutTitle.text || '') : '',
          traces: plot && Array.isArray(plot.data) ? plot.data.map(t => ({name: t.name || '', meta: t.meta || '',
            x: t.x ? Array.from(t.x).slice(0, 2000) : [], y: t.y ? Array.from(t.y).slice(0, 2000) : []})) : [],
          sliders: Object.fromEntries([...box.querySelectorAll('.rlnb-knob.widget-slider')].map(s =>
            [knob(s), (s.querySelector('.widget-readout') || {}).textContent]))}; }"""


def widget_box(page, hook: str):
    """The locator of the first rlnb widget of kind ``hook`` (``clip-explorer``, ``token-x-ray``, ``dashboard``,
    ``lab``: its class name in kebab case, rlnb.viz.hooks); None when there is none."""
    tag = "box-" + hook
    return page.locator(f'[data-rlnb-box="{tag}"]') if page.evaluate(BOX, [hook, tag]) else None


def box_state(box) -> dict:
    """The box's readout (text, and its values by key), its first figure (title, traces with x and y), its sliders."""
    state = box.evaluate(STATE)
    # an explorer's exact numbers by key (data-rlnb-values), whatever its readout's wording; else the text
    state["values"] = json.loads(state["exact"]) if state.get("exact") else parse_readout(state["readout"])
    return state


def press_slider(box, name: str, keys: list[str]) -> None:
    """Focus the handle of the slider of knob ``name`` in ``box`` and press ``keys``, as a keyboard user."""
    tag = "slider-" + "".join(ch if ch.isalnum() else "-" for ch in name)
    if not box.page.evaluate(SLIDER, [box.get_attribute("data-rlnb-box"), name, tag]):
        raise LookupError(f"no slider of knob {name!r} in the widget; sliders: {list(box_state(box)['sliders'])}")
    handle = box.page.locator(f'[data-rlnb-slider="{tag}"] .noUi-handle').first
    handle.scroll_into_view_if_needed()
    handle.focus()
    for key in keys:
        handle.press(key)
        time.sleep(0.15)


def wait_for(predicate, *, timeout_s: float, every_s: float = 0.25, what: str = "a condition"):
    """Poll ``predicate()`` until it returns something truthy; that value (TimeoutError naming ``what``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(every_s)
