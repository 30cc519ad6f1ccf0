"""Where figures live: an interactive ``FigureWidget``, or a plain figure redrawn into an ``Output``.

``FigureWidget`` needs ``anywidget`` and a frontend that loads it. Where it cannot load (Colab, some
VS Code setups), the "static" backend redraws a plain plotly figure into an ``ipywidgets.Output``
on every change. ``set_backend("auto")`` (the default) picks for you; ``set_backend("static")`` or
the environment variable ``RLNB_VIZ_BACKEND=static`` forces the fallback.
"""

from __future__ import annotations

import contextlib
import copy
import os
import sys
import warnings

import ipywidgets as widgets
import plotly.graph_objects as go

from rlnb.viz import site
from rlnb.viz.figures import theme

BACKENDS = ("auto", "widget", "static")
_state = {"backend": "auto"}


def set_backend(name: str) -> None:
    """``"widget"`` (FigureWidget), ``"static"`` (redraw into an Output) or ``"auto"``."""
    if name not in BACKENDS:
        raise ValueError(f"name: expected one of {BACKENDS}, got {name!r}")
    _state["backend"] = name


def get_backend() -> str:
    """The backend new figures will use: ``"widget"`` or ``"static"`` (``"auto"`` resolved)."""
    name = _state["backend"]
    if name == "auto":
        name = os.environ.get("RLNB_VIZ_BACKEND", "auto")
        if name not in BACKENDS:
            raise ValueError(f"RLNB_VIZ_BACKEND: expected one of {BACKENDS}, got {name!r}")
    return _detect() if name == "auto" else name


def _detect() -> str:
    if "google.colab" in sys.modules:        # Colab's frontend does not load anywidget by default
        return "static"
    if any(k in os.environ for k in ("VSCODE_PID", "VSCODE_CWD")):  # FigureWidget is unreliable there
        return "static"
    try:
        import anywidget  # noqa: F401  (FigureWidget is an anywidget since plotly 6)
    except ImportError:
        return "static"
    return "widget"


def _shell():
    """The running IPython shell, or None in plain Python."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def mime_bundle(fig: go.Figure) -> tuple[dict, dict]:
    """What ``display(fig)`` would show, from plotly's current renderer (Colab's HTML in Colab,
    plotly's JSON mimetype in JupyterLab). Outside a shell (tests) plotly's JSON mimetype."""
    bundle = fig._repr_mimebundle_(include=None, exclude=None) if _shell() is not None else {}
    if not bundle:
        bundle = {"application/vnd.plotly.v1+json": fig.to_plotly_json()}
    return {**bundle, "text/plain": f"<{fig.layout.title.text or 'plotly figure'}>"}, {}


def sync_figure(live: go.Figure, new: go.Figure) -> None:
    """Copy ``new``'s traces and layout into ``live`` in one frontend update. A new trace structure (the lab's
    fork adds an overlay) first replaces the traces, once."""
    if [t.type for t in live.data] != [t.type for t in new.data]:
        live.data = ()
        live.add_traces(list(new.data))
    batch = live.batch_update() if isinstance(live, go.FigureWidget) else contextlib.nullcontext()
    with batch:
        for old, fresh in zip(live.data, new.data, strict=True):
            props = fresh.to_plotly_json()
            props.pop("uid", None)
            old.update(props, overwrite=True)
        layout = new.layout.to_plotly_json()
        layout.pop("template", None)  # the theme is the live figure's own; copying it is slow
        live.layout.update(layout, overwrite=True)


class LiveFigure:
    """A figure on screen that can be updated: ``.fig`` (edit it) and ``.view`` (display it).

    With the widget backend ``.fig`` is a ``FigureWidget`` and ``.view`` is the same object. With the
    static backend ``.fig`` is a plain ``Figure`` and ``.view`` an ``Output`` that ``render()`` redraws;
    ``n_renders`` counts the redraws.
    """

    def __init__(self, fig: go.Figure, *, backend: str | None = None):
        self.backend = backend or get_backend()
        if self.backend not in ("widget", "static"):
            raise ValueError(f"backend: expected 'widget' or 'static', got {self.backend!r}")
        self.n_renders = 0
        theme.themed(fig)
        if self.backend == "widget":
            try:
                self.fig = go.FigureWidget(fig)
                self.view = self.fig
            except Exception as err:  # anywidget missing or broken: keep going with the fallback
                warnings.warn(f"FigureWidget unavailable ({err}); using the static backend", stacklevel=2)
                self.backend = "static"
        if self.backend == "static":
            self.fig = fig
            self.view = widgets.Output()
        theme.register_live(self)
        self.render()

    def update(self, new: go.Figure) -> None:
        """Show ``new`` (built by the same builder, so it has the same traces)."""
        sync_figure(self.fig, new)
        self.render()

    def refresh_view(self) -> None:
        """Hand the frontend the whole figure again, just before it is displayed.

        plotly does this itself when a bare ``FigureWidget`` is displayed, but not for one inside a box
        (every explorer, dashboard and lab). Without it a view drawn later starts from the frontend's copy,
        which misses any update that arrived while the widget's script was still loading on a busy machine
        (seen as an empty figure). The static backend simply redraws."""
        if self.backend == "static":
            self.render()
            return
        fig = self.fig
        if hasattr(fig, "_widget_data") and hasattr(fig, "_layout_obj"):  # plotly's synced copies
            fig._widget_layout = copy.deepcopy(fig._layout_obj._props)
            fig._widget_data = copy.deepcopy(fig._data)

    def render(self) -> None:
        """Redraw the static view (the widget view updates itself)."""
        if self.backend != "static":
            return
        data, meta = mime_bundle(self.fig)
        self.view.outputs = ({"output_type": "display_data", "data": data, "metadata": meta},)
        self.n_renders += 1
        site.changed(self.view)  # a page showing this view (site mode) gets the new state

    def retheme(self) -> None:
        self.fig.update_layout(template=theme.template())
        self.render()
