"""Plotly figures that follow JupyterLab's light and dark theme after they are drawn.

A plotly figure is drawn with the colours of the template it was built with: a figure built in the light
theme stays a white box when the learner switches JupyterLab to dark (and a dark one a black box in light).
JupyterLab marks its theme on the page (``<body data-jp-theme-light="true|false">``) and plotly writes each
colour as an inline style (``fill: rgb(42, 63, 95)``), so a small style sheet can swap exactly the template's
background, text and grid colours for the other template's, whichever theme a figure was built in: trace colours
(the course palette) and colours a figure sets on purpose are left alone. The kernel shows the sheet as an
invisible output of the cell that draws a figure (once per cell run), so it travels with the notebook.
"""

from __future__ import annotations

import threading

# The colours plotly writes for each template, as the browser serialises them (rlnb's two templates:
# theme.TEMPLATES); tests/test_viz_page_style.py checks them against plotly's templates.
LIGHT = {"paper": ("white", "rgb(255, 255, 255)"), "text": "rgb(42, 63, 95)", "grid": "rgb(235, 240, 248)"}
DARK = {"paper": ("rgb(17, 17, 17)",), "text": "rgb(242, 245, 250)", "grid": "rgb(40, 52, 66)"}
HOOK = "rlnb-page-style"  # the <style> element's id: tests and the browser check find it by this


def _rules(page: str, src: dict, dst: dict) -> list[str]:
    """CSS that repaints ``src``-template colours as ``dst``'s while JupyterLab is in ``page`` ("true" light)."""
    on = f'body[data-jp-theme-light="{page}"] .js-plotly-plot'
    bg = dst["paper"][-1]
    rules = [f'{on} svg.main-svg[style*="background: {c}"] {{ background: {bg} !important; }}' for c in src["paper"]]
    rules += [f'{on} rect[style*="fill: {c}"] {{ fill: {bg} !important; }}' for c in src["paper"]]  # legend box
    rules.append(f'{on} text[style*="fill: {src["text"]}"] {{ fill: {dst["text"]} !important; }}')
    rules.append(f'{on} path[style*="stroke: {src["grid"]}"] {{ stroke: {dst["grid"]} !important; }}')
    return rules


def css() -> str:
    """The style sheet: light-built figures repainted on a dark page, dark-built ones on a light page."""
    return "\n".join(_rules("false", LIGHT, DARK) + _rules("true", DARK, LIGHT))


def html() -> str:
    return f'<style id="{HOOK}">\n{css()}\n</style>'


_shown = {"cell": None}  # the kernel's execution count of the cell that last got the sheet


def show_once_per_cell() -> bool:
    """Display the sheet in the running cell unless it already has it; only in a Jupyter kernel, only from the
    main thread (a lab playing in the background must not write into whichever cell runs). True if shown."""
    if threading.current_thread() is not threading.main_thread():
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None or getattr(shell, "kernel", None) is None:  # plain Python, a terminal IPython, tests
        return False
    cell = shell.execution_count
    if _shown["cell"] == cell:
        return False
    from IPython.display import HTML, display

    display(HTML(html()))
    _shown["cell"] = cell
    return True
