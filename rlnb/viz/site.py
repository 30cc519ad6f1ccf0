"""Site mode: notebooks executed for the course website (``RLNB_SITE=1``, set by ``scripts/build_site.py``).

A web page has no kernel, so no widget can draw there and a ``FigureWidget`` stays blank. In site mode:

- every plotly figure displays as ``<div class="rlnb-figure" data-rlnb-figure="{json}">``: the figure without its
  template. The site's script (``docs/site/rlnb-figures.js``) draws it with the plotly.js the site serves itself
  (no CDN: the site works offline) in the plotly template of the page's light or dark scheme, and redraws it
  when the reader flips the scheme;
- an explorer, dashboard or lab displays as static HTML of its widget tree (title and readouts as they are, each
  control as ``name = value``, its figure as above) under a display id, so that a later redraw (a dashboard
  while it trains) replaces it and the page shows the last state, not the empty first one;
- tqdm's notebook bar (a widget) becomes its text bar.

Nothing here changes how notebooks look in JupyterLab: without ``RLNB_SITE=1`` it is never activated.
"""

from __future__ import annotations

import html
import os
import sys
import weakref

import ipywidgets as widgets

# the classes shown as their widget tree (by name, so this module imports none of them: no cycle)
HOLDERS = (("rlnb.viz.explorers.base", "Explorer"), ("rlnb.viz.live.dashboard", "Dashboard"),
           ("rlnb.viz.live.lab", "Lab"))
RENDERER = "rlnb_site"
PLOTLY = "application/vnd.plotly.v1+json"
_shown: list = []  # [weak widget, display handle, ids of its Output widgets, last html]


def active(env=None) -> bool:
    """Whether ``RLNB_SITE`` asks for site mode ("1", "true" or "yes")."""
    return (os.environ if env is None else env).get("RLNB_SITE", "0").strip().lower() in ("1", "true", "yes")


def figure_html(fig) -> str:
    """The page's element for one figure (a ``go.Figure`` or its dict): its JSON without the template, which the
    site's script picks from the page's scheme."""
    from plotly.io.json import to_json_plotly

    d = fig if isinstance(fig, dict) else fig.to_plotly_json()
    layout = {k: v for k, v in (d.get("layout") or {}).items() if k != "template"}
    payload = to_json_plotly({"data": d.get("data", []), "layout": layout})
    return f'<div class="rlnb-figure" data-rlnb-figure="{html.escape(payload, quote=True)}"></div>'


def _renderer():
    from plotly.io.base_renderers import MimetypeRenderer

    class SiteRenderer(MimetypeRenderer):
        """plotly's renderer in site mode: ``fig`` as a cell's last line and ``fig.show()`` both end here."""

        def to_mimebundle(self, fig_dict):
            title = ((fig_dict.get("layout") or {}).get("title") or {}).get("text") or "plotly figure"
            return {"text/html": figure_html(fig_dict), "text/plain": f"<{title}>"}

    return SiteRenderer()


def _value(w) -> str:
    v = w.value
    if isinstance(v, float):
        return f"{v:.3g}"
    if isinstance(v, tuple):
        return "(" + ", ".join(f"{x:.3g}" if isinstance(x, float) else str(x) for x in v) + ")"
    return str(v)


def _output_html(out: dict) -> str:
    data = out.get("data") or {}
    if PLOTLY in data:  # a figure drawn outside a shell (plotly's renderer is not asked there)
        return figure_html(data[PLOTLY])
    if "text/html" in data:
        return data["text/html"]
    text = data.get("text/plain") or out.get("text") or ""
    return f"<pre>{html.escape(text)}</pre>" if text else ""


def widget_html(w) -> str:
    """Static HTML of a widget tree as it is now: boxes as rows or columns, HTML widgets as their HTML, an
    ``Output`` as its outputs, a control as "description = value"; buttons are left out (a page cannot press them)."""
    if isinstance(w, widgets.Output):
        return "".join(_output_html(o) for o in w.outputs)
    if isinstance(w, widgets.Box):
        kind = "row" if isinstance(w, widgets.HBox) else "column"
        inner = "".join(widget_html(c) for c in w.children)
        return f'<div class="rlnb-box rlnb-{kind}">{inner}</div>' if inner else ""
    if isinstance(w, (widgets.HTML, widgets.HTMLMath)):
        return f"<div>{w.value}</div>" if w.value else ""
    if isinstance(w, widgets.Button) or not hasattr(w, "value"):
        return ""
    name = getattr(w, "description", "") or ""
    return f'<span class="rlnb-control"><code>{html.escape(name)} = {html.escape(_value(w))}</code></span>'


def _outputs(w) -> set[int]:
    if isinstance(w, widgets.Output):
        return {id(w)}
    return set().union(*(_outputs(c) for c in w.children)) if isinstance(w, widgets.Box) else set()


def _page_html(widget) -> str:
    note = ('<p class="rlnb-static-note">In the notebook this is a live widget: its controls move the figure. '
            "Here: its last state, with the values it was drawn at.</p>")
    return f'<div class="rlnb-widget">{note}{widget_html(widget)}</div>'


def show(holder) -> None:
    """Display an explorer, dashboard or lab as its static HTML, under a display id that later redraws update."""
    from IPython.display import display

    widget = holder.widget  # the static backend redraws its Output on every update: it is current
    text = _page_html(widget)
    handle = display({"text/html": text, "text/plain": f"<{type(holder).__name__}>"}, raw=True, display_id=True)
    _shown.append([weakref.ref(widget), handle, _outputs(widget), text])


def changed(view) -> None:
    """``view`` (an ``Output``) was redrawn: update each shown widget that holds it, if its HTML changed."""
    for entry in list(_shown):
        widget = entry[0]()
        if widget is None:
            _shown.remove(entry)
        elif id(view) in entry[2]:
            text = _page_html(widget)
            if text != entry[3]:
                entry[3] = text
                entry[1].update({"text/html": text, "text/plain": "<widget>"}, raw=True)


def activate() -> None:
    """Site mode for this process: plotly's default renderer, the holders' display, tqdm's text bar."""
    import plotly.io as pio
    import tqdm.auto
    import tqdm.std

    pio.renderers[RENDERER] = _renderer()
    pio.renderers.default = RENDERER
    class TextBar(tqdm.std.tqdm):
        """tqdm's text bar on stdout: a page shows stderr as an error (red), and a finished bar is no error."""

        def __init__(self, *args, **kwargs):
            kwargs.setdefault("file", sys.stdout)
            super().__init__(*args, **kwargs)

    tqdm.auto.tqdm = TextBar  # rlnb imports tqdm.auto's bar when a run starts, so it gets this one
    try:
        from IPython import get_ipython
    except ImportError:
        return
    ip = get_ipython()
    if ip is None:
        return
    formatter = ip.display_formatter.ipython_display_formatter
    for module, name in HOLDERS:
        formatter.for_type_by_name(module, name, show)
