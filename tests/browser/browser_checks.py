"""What a person sees in a notebook, read from the page, and the verdict on it.

Two halves, so that the verdict can be tested without a browser:
- ``DESCRIBE`` (JavaScript, run in the page): every cell's outputs as plain data. The output *model*
  (output type, stream name and text, error name) comes from JupyterLab's notebook model when the app is
  there; what was *rendered* comes from the DOM of each ``.jp-OutputArea-child`` (one per model output):
  error widgets, "Loading widget..." placeholders, empty views, sliders, plotly figures, rlnb readouts.
- ``problems(cells)`` (Python): the list of things a person would call broken, as readable strings.

Text checks read output areas and output models only, never cell sources (a cell may *mention* an error).
"""

from __future__ import annotations

import re

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
PLOTLY_MIME = "application/vnd.plotly.v1+json"

# (rootSelector) => Array<cell>; run as page.evaluate(DESCRIBE, ".jp-Notebook"). Reads JupyterLab's current
# notebook; without JupyterLab's app (a static page) the element `rootSelector`, where each output element
# stands for one output, a widget unless it carries data-mime-type.
DESCRIBE = r"""
(rootSelector) => {
  const app = window.jupyterapp;
  const panel = app && app.shell.currentWidget;
  const root = (panel && panel.content && panel.content.node) || document.querySelector(rootSelector) || document;
  const models = panel && panel.content && panel.content.widgets
    ? panel.content.widgets.map(c => c.model.type === 'code' ? c.model.outputs.toJSON() : []) : null;
  const all = (el, sel) => [...(el.matches(sel) ? [el] : []), ...el.querySelectorAll(sel)];  // el too
  const text = (el) => (el.innerText || el.textContent || '').trim();
  const visible = (el) => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const plot = (el) => ({
    traces: Array.isArray(el.data) ? el.data.length : 0,
    points: Array.isArray(el.data) ? el.data.map(t => (t.x && t.x.length) || (t.y && t.y.length) || 0) : [],
    names: Array.isArray(el.data) ? el.data.map(t => t.name || '') : [],
    svg: !!el.querySelector('svg.main-svg'),
    visible: visible(el),
    // why a figure has no traces: never given any (layout and context kept) or purged after drawing (both gone)
    state: (el.layout ? 'layout' : 'no-layout') + '/' + (el._context ? 'context' : 'no-context'),
    view: view(el),
    ...readable(el),
  });
  // rlnb's live figure (rlnb.viz.plotview): its state, the version drawn and the newest its model holds
  const view = (el) => {
    const v = el.closest('.rlnb-plotview');
    return v ? {state: v.dataset.rlnbState || null, drawn: v.dataset.rlnbVersion || null,
                latest: v.dataset.rlnbLatest || null} : null;
  };
  // what a reader sees of a figure: each shown cartesian axis and its title, the legend's entries, annotations
  const readable = (el) => {
    const fl = el._fullLayout;
    if (!fl) return {axes: [], legend: [], annotations: []};
    const axes = [];
    for (const sp of ((fl._subplots && fl._subplots.cartesian) || [])) {
      const m = sp.match(/^(x\d*)(y\d*)$/);
      if (!m) continue;
      for (const id of [m[1], m[2]]) {
        const ax = fl[id[0] + 'axis' + id.slice(1)];
        if (ax && ax.visible !== false && ax.showticklabels !== false)
          axes.push({id, title: ((ax.title && ax.title.text) || '').replace(/^Click to enter .* title$/, '')});
      }
    }
    const shown = (t) => fl.showlegend && t.showlegend !== false && t.visible !== false;
    return {axes, legend: Array.isArray(el._fullData) ? el._fullData.filter(shown).map(t => t.name || '') : [],
            annotations: (fl.annotations || []).map(a => a.text || '')};
  };
  // text a reader reads as prose: all of a text output; elsewhere not code (rlnb's readouts excepted) or figures
  const TEXT_MIMES = ['text/plain', 'application/vnd.jupyter.stdout', 'application/vnd.jupyter.stderr'];
  const prose = (el) => {
    if (TEXT_MIMES.includes(el.getAttribute('data-mime-type'))) return text(el);
    const skip = 'pre, code:not(.rlnb-readout), svg, .js-plotly-plot, style, script, textarea';
    const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    const parts = [];
    for (let n = walk.nextNode(); n; n = walk.nextNode())
      if (!n.parentElement.closest(skip)) parts.push(n.textContent);
    return parts.join(' ');
  };
  const describe = (el) => ({
    mime: el.getAttribute('data-mime-type'),
    text: text(el).slice(0, 2000),
    errorWidget: !!el.querySelector('.jupyter-widgets-error-widget') || /Error displaying widget/.test(text(el)),
    loading: /Loading widget\.\.\./.test(text(el)),
    empty: !text(el) && [...el.children].every(c => c.children.length === 0),
    widgets: el.querySelectorAll('.jupyter-widgets').length,
    sliders: [...el.querySelectorAll('.widget-slider')].filter(visible).map(s => {
      const label = s.querySelector('.widget-label'); const ro = s.querySelector('.widget-readout');
      return {name: label ? text(label) : '', value: ro ? text(ro) : ''}; }),
    plots: all(el, '.js-plotly-plot').map(plot),
    readouts: [...el.querySelectorAll('code.rlnb-readout')].map(text),
    prose: prose(el).slice(0, 20000),
    lines: TEXT_MIMES.includes(el.getAttribute('data-mime-type')) ? text(el).split('\n').length : 0,
    // data rows a reader scrolls through (header rows and rows folded away are not counted)
    tables: [...el.querySelectorAll('table')].map(t => [...t.querySelectorAll('tr')]
      .filter(r => visible(r) && r.querySelector('td')).length),
    redBars: [...el.querySelectorAll('.progress-bar-danger')].filter(visible).length,
    explorers: [...el.querySelectorAll('.widget-vbox')]
      .filter(b => b.querySelector(':scope > .widget-html code.rlnb-readout'))
      .map(b => ({title: text(b.querySelector(':scope > .widget-html b') ||
                              b.querySelector(':scope > .widget-html code.rlnb-readout')).slice(0, 80),
                  plots: b.querySelectorAll('.js-plotly-plot').length})),
  });
  const cells = [...root.querySelectorAll('.jp-Cell')];
  return cells.map((cell, i) => {
    const children = [...cell.querySelectorAll('.jp-OutputArea-child')];
    const dom = children.map(c => c.querySelector('.jp-OutputArea-output')).map(o => o ? describe(o) : null);
    const model = models ? (models[i] || []) : dom.map(d => ({output_type: 'display_data',
      data: Object.fromEntries([[d && d.mime ? d.mime : 'application/vnd.jupyter.widget-view+json', '']])}));
    const outputs = model.map((m, k) => ({
      output_type: m.output_type, name: m.name || null,
      text: (Array.isArray(m.text) ? m.text.join('') : (m.text || '')).slice(-4000),
      ename: m.ename || null, evalue: m.evalue || null,
      mimes: m.data ? Object.keys(m.data) : [], dom: dom[k] || null }));
    return {index: i, kind: cell.classList.contains('jp-CodeCell') ? 'code' : 'other', outputs};
  });
}
"""


def is_widget(out: dict) -> bool:
    return WIDGET_MIME in out.get("mimes", ())


def _output_problems(cell: int, out: dict) -> list[str]:
    where = f"cell {cell}"
    if out["output_type"] == "error":
        return [f"{where}: error output {out['ename']}: {out['evalue']}"]
    if out["output_type"] == "stream" and out.get("name") == "stderr" and "Traceback" in out.get("text", ""):
        return [f"{where}: traceback on stderr: {out['text'][-300:]!r}"]
    dom = out.get("dom")
    if not (is_widget(out) or PLOTLY_MIME in out.get("mimes", ())):
        return []
    kind = "widget" if is_widget(out) else "plotly figure"
    if dom is None:
        return [f"{where}: {kind} output has no rendered element"]
    found = []
    if dom["errorWidget"]:
        found.append(f"{where}: widget failed to render ({dom['text'][:120]!r})")
    if dom["loading"]:
        found.append(f"{where}: widget still shows 'Loading widget...'")
    if dom["empty"] and not dom["errorWidget"]:
        found.append(f"{where}: {kind} rendered empty")
    for k, p in enumerate(dom["plots"]):
        if not (p["svg"] and p["traces"] > 0):
            found.append(f"{where}: plotly figure {k} has no drawing ({p['traces']} traces, svg={p['svg']}, "
                         f"{p.get('state', '?')})")
        elif p.get("view") and (p["view"]["state"] != "drawn" or p["view"]["drawn"] != p["view"]["latest"]):
            found.append(f"{where}: live figure {k} is behind its model (state {p['view']['state']}, version "
                         f"{p['view']['drawn']} drawn of {p['view']['latest']})")
    for ex in dom["explorers"]:
        if ex["plots"] == 0:
            found.append(f"{where}: {ex['title']!r} shows a readout but no figure")
    return found


def problems(cells: list[dict]) -> list[str]:
    """Everything broken in a described notebook: error outputs, tracebacks on stderr, and widget or
    figure outputs that did not render (error widget, still loading, empty, a figure without a drawing,
    an explorer without its figure)."""
    return [p for c in cells for out in c["outputs"] for p in _output_problems(c["index"], out)]


def counts(cells: list[dict]) -> dict[str, int]:
    """How many rendered (visible) sliders, plotly figures (with a drawing) and widget outputs the page shows."""
    doms = [o["dom"] for c in cells for o in c["outputs"] if o.get("dom")]
    return {"sliders": sum(len(d["sliders"]) for d in doms),
            "plots": sum(sum(p["svg"] and p["traces"] > 0 for p in d["plots"]) for d in doms),
            "widgets": sum(is_widget(o) for c in cells for o in c["outputs"])}


def stream_text(cell: dict, name: str = "stdout") -> str:
    return "".join(o["text"] for o in cell["outputs"] if o["output_type"] == "stream" and o["name"] == name)


READOUT_ITEM = re.compile(r"\s*(.+?)\s*=\s*(\S+)\s*$")


def parse_readout(text: str) -> dict[str, float | str]:
    """``"a = 0.1000 · b = 3"`` -> ``{"a": 0.1, "b": 3.0}`` (values that are not numbers stay strings)."""
    out: dict[str, float | str] = {}
    for part in text.split("·"):
        m = READOUT_ITEM.match(part)
        if m:
            try:
                out[m.group(1)] = float(m.group(2))
            except ValueError:
                out[m.group(1)] = m.group(2)
    return out
