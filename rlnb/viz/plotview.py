"""``PlotView``: the widget that shows a live figure in JupyterLab, and ``PlotlyJS``, the plotly.js it draws with.

Why not plotly's ``FigureWidget``: its front end keeps its own copy of the figure (``_widget_data``) and changes it
by applying incremental messages (restyle, relayout, add traces) in handlers that its 5 MB module registers once it
has loaded, so a view can only be as right as every message before it. On a busy machine that failed in the ways a
learner sees (empty axes in every figure at load 10-15, even ``go.FigureWidget(go.Scatter(y=[1, 2, 3]))``; a reload
drawing from the same stale copy), and two mechanisms were measured here: anywidget gives a model's module 2 s to
load and initialize, and the 5 MB module missed that under load ("[anywidget] Failed to initialize model." on 2 of 3
pages of four plain FigureWidgets at load 12); and a state update the kernel sends while the page is still making
the model can be lost (a first version of this widget left one figure of 69 at its opening state).

Here the state is the whole figure, every time: ``figure`` (JSON of data and layout), ``template`` (JSON of the
theme's template, re-sent only when it changes) and ``version`` (a counter) change together in one message. The
widget model in the page is then always the newest state, whatever the timing; a view, a second view or a reloaded
page draws it (``plotview.js``); the page asks for the state again once it has made the model and at each new view,
so an update lost while it was being made is sent again. plotly.js (the copy the plotly package ships, no network)
travels once per kernel as the ``source`` of the one ``PlotlyJS`` model that every view refers to, outside the
module anywidget times.
"""

from __future__ import annotations

import functools
import importlib.resources
import threading
from pathlib import Path

import anywidget
import ipywidgets as widgets
import traitlets

# plotly.min.js is a UMD bundle: given a `module` it sets module.exports instead of a global
_LIB_HEAD = "const module = { exports: {} };\n"
_LIB_TAIL = "\nexport default module.exports;\n"

# The model's own module is small: anywidget gives a model's module 2 s to load and initialize, and plotly.js
# (5 MB) takes longer than that to load on a busy machine ("[anywidget] Failed to initialize model."). So plotly.js
# travels as the model's `source` and is imported here without being waited for; views wait for the slot instead.
_LIB_ESM = """
function slot() {
  const key = "__rlnbPlotly";
  if (!globalThis[key]) {
    let resolve;
    const promise = new Promise((r) => { resolve = r; });
    globalThis[key] = { promise, resolve, Plotly: null, loading: false };
  }
  return globalThis[key];
}
function initialize({ model }) {
  const lib = slot();
  if (lib.Plotly || lib.loading) return;
  lib.loading = true;
  const url = URL.createObjectURL(new Blob([model.get("source")], { type: "text/javascript" }));
  import(url).then((mod) => { lib.Plotly = mod.default; lib.resolve(mod.default); },
                   (err) => { lib.loading = false; console.error("rlnb: plotly.js did not load", err); })
             .finally(() => URL.revokeObjectURL(url));
}
export default { initialize };
"""


@functools.lru_cache(maxsize=1)
def library_source() -> str:
    """plotly.js as an ES module whose default export is ``Plotly`` (read once per process)."""
    path = importlib.resources.files("plotly") / "package_data" / "plotly.min.js"
    return _LIB_HEAD + path.read_text(encoding="utf-8") + _LIB_TAIL


class PlotlyJS(anywidget.AnyWidget):
    """plotly.js for the page: a model with no view, created once per kernel (``plotly_js()``); its ``source`` is
    plotly.js, which its small module imports into the page's one slot that every ``PlotView`` waits for."""

    _esm = _LIB_ESM
    source = traitlets.Unicode("").tag(sync=True)

    def __init__(self, **kwargs):
        kwargs.setdefault("source", library_source())
        super().__init__(**kwargs)


_lib: list[PlotlyJS] = []  # the kernel's one PlotlyJS model (a list: replaced if a test closes it)


def plotly_js() -> PlotlyJS:
    """The kernel's ``PlotlyJS`` model, made on first use (again if it was closed)."""
    if not _lib or _lib[0].comm is None:
        _lib[:] = [PlotlyJS()]
    return _lib[0]


class PlotView(anywidget.AnyWidget):
    """A figure in the page. Set ``figure``/``template`` and bump ``version`` together (``LiveFigure`` does)."""

    _esm = Path(__file__).with_name("plotview.js")
    _css = ".rlnb-plotview { width: 100%; } .rlnb-plot-note { font-size: 0.85em; opacity: 0.75; padding: 2px 4px; }"
    figure = traitlets.Unicode("{}").tag(sync=True)
    template = traitlets.Unicode("").tag(sync=True)
    version = traitlets.Int(0).tag(sync=True)
    lib = traitlets.Instance(PlotlyJS, allow_none=True).tag(sync=True, **widgets.widget_serialization)

    def __init__(self, **kwargs):
        kwargs.setdefault("lib", plotly_js())
        super().__init__(**kwargs)
        self._lock = threading.Lock()
        self.n_syncs = 0  # times the page asked for the state again
        self.on_msg(self._on_message)

    def show(self, figure_json: str, template_json: str) -> None:
        """One state update: the figure, its template where it changed, the next version."""
        with self._lock, self.hold_sync():
            self.figure = figure_json
            if template_json != self.template:
                self.template = template_json
            self.version += 1

    def _on_message(self, _widget, content, _buffers) -> None:
        """"sync": the page's model (once it is made) or a new view asks for the state again. An update sent while
        the page was still making the model can be lost there (seen under load: a view left at version 0 while the
        kernel had sent 1); sending the current state again closes that gap, whatever the timing."""
        if isinstance(content, dict) and content.get("type") == "sync":
            with self._lock:
                self.n_syncs += 1
                self.send_state(["figure", "template", "version"])
