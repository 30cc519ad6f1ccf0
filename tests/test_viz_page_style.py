"""The page style that repaints plotly figures when JupyterLab's theme changes: its colours are the templates' own,
it is shown once per cell run, only in a kernel's main thread."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import plotly.graph_objects as go
import plotly.io as pio
import pytest

from rlnb.viz.figures import page_style, theme


def _rgb(color: str) -> str:
    """How the browser serialises a template colour: '#2a3f5f' -> 'rgb(42, 63, 95)'."""
    if color.startswith("rgb"):
        return ", ".join(p.strip() for p in color.split(","))
    h = color.lstrip("#")
    return "rgb({}, {}, {})".format(*(int(h[i:i + 2], 16) for i in (0, 2, 4)))


@pytest.mark.parametrize(("template", "colors"), [("plotly_white", page_style.LIGHT), ("plotly_dark", page_style.DARK)])
def test_colours_are_the_templates(template, colors):
    layout = pio.templates[template].layout
    assert _rgb(layout.font.color) == colors["text"]
    assert _rgb(layout.xaxis.gridcolor) == colors["grid"] == _rgb(layout.yaxis.gridcolor)
    assert layout.paper_bgcolor in colors["paper"] or _rgb(layout.paper_bgcolor) in colors["paper"]


def test_templates_are_the_themes():
    assert set(theme.TEMPLATES.values()) == {"plotly_white", "plotly_dark"}


def test_css_repaints_each_way():
    css = page_style.css()
    dark_page = [r for r in css.splitlines() if 'data-jp-theme-light="false"' in r]
    light_page = [r for r in css.splitlines() if 'data-jp-theme-light="true"' in r]
    assert any('fill: rgb(42, 63, 95)"] { fill: rgb(242, 245, 250) !important' in r for r in dark_page)
    assert any('background: white"] { background: rgb(17, 17, 17) !important' in r for r in dark_page)
    assert any('fill: rgb(242, 245, 250)"] { fill: rgb(42, 63, 95) !important' in r for r in light_page)
    assert any('stroke: rgb(40, 52, 66)"] { stroke: rgb(235, 240, 248) !important' in r for r in light_page)
    assert page_style.html().startswith(f'<style id="{page_style.HOOK}">')


class _Shell:
    def __init__(self):
        self.kernel = object()
        self.execution_count = 1


@pytest.fixture
def shown(monkeypatch):
    shell, out = _Shell(), []
    import IPython
    import IPython.display

    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    monkeypatch.setattr(IPython.display, "display", lambda obj: out.append(obj.data))
    monkeypatch.setitem(page_style._shown, "cell", None)
    return SimpleNamespace(shell=shell, out=out)


def test_once_per_cell_run(shown):
    theme.themed(go.Figure())
    theme.themed(go.Figure())
    assert len(shown.out) == 1 and page_style.HOOK in shown.out[0]
    shown.shell.execution_count = 2          # the next cell (or the same cell run again) gets its own copy
    theme.themed(go.Figure())
    assert len(shown.out) == 2


def test_not_from_a_background_thread(shown):
    result = []
    t = threading.Thread(target=lambda: result.append(page_style.show_once_per_cell()))
    t.start()
    t.join()
    assert result == [False] and shown.out == []


def test_not_outside_a_kernel(shown):
    shown.shell.kernel = None                # a terminal IPython: no page to style
    assert page_style.show_once_per_cell() is False and shown.out == []
