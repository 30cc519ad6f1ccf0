"""Site mode (rlnb.viz.site): what executed notebooks carry to the course website, tested without a kernel."""

import html
import json
import re

import plotly.graph_objects as go
import pytest

from rlnb.viz import AdvantageExplorer, set_theme, site
from rlnb.viz.backend import LiveFigure


def figure_json(text: str) -> dict:
    found = re.search(r'<div class="rlnb-figure" data-rlnb-figure="([^"]*)"></div>', text)
    assert found, f"expected an rlnb-figure element in {text[:200]!r}"
    return json.loads(html.unescape(found.group(1)))


@pytest.mark.parametrize("env, on", [({"RLNB_SITE": "1"}, True), ({"RLNB_SITE": "yes"}, True),
                                     ({"RLNB_SITE": "0"}, False), ({}, False)])
def test_site_mode_is_on_only_when_asked(env, on):
    assert site.active(env) is on


def test_a_figure_leaves_without_its_template_so_the_page_picks_light_or_dark():
    set_theme("dark")
    try:
        fig = go.Figure(go.Scatter(x=[1, 2], y=[3, 4], name="reward"), layout={"template": "plotly_dark",
                                                                                 "title": "t & <b>"})
        got = figure_json(site.figure_html(fig))
    finally:
        set_theme("light")
    assert "template" not in got["layout"]
    assert got["layout"]["title"]["text"] == "t & <b>"  # escaped in the attribute, intact once read
    assert got["data"][0]["name"] == "reward" and got["data"][0]["type"] == "scatter"


def test_the_renderer_gives_the_page_element_and_a_text_fallback():
    bundle = site._renderer().to_mimebundle(go.Figure(go.Bar(y=[1]), layout={"title": "runtimes"}).to_dict())
    assert bundle["text/plain"] == "<runtimes>"
    assert figure_json(bundle["text/html"])["data"][0]["type"] == "bar"


@pytest.mark.parametrize("backend", ["static"], indirect=True)
def test_an_explorer_becomes_its_controls_readout_and_figure(backend):
    ex = AdvantageExplorer(rewards=(1, 0, 0, 0))
    text = site.widget_html(ex.widget)
    assert ex.title in text
    assert "rlnb-readout" in text  # the readout line as the notebook shows it
    controls = re.findall(r"<code>([^<]*) = ([^<]*)</code>", text)
    assert len(controls) == len([w for w in ex.controls.values() if hasattr(w, "value")]) and controls
    assert len(figure_json(text)["data"]) == len(ex.fig.data)


class FakeHandle:
    def __init__(self):
        self.updates = []

    def update(self, obj, raw=False):
        self.updates.append(obj["text/html"])


@pytest.mark.parametrize("backend", ["static"], indirect=True)
def test_a_redraw_updates_the_page_that_shows_the_widget_and_no_other(backend, monkeypatch):
    handles = []
    monkeypatch.setattr("IPython.display.display", lambda *a, **k: handles.append(FakeHandle()) or handles[-1])
    monkeypatch.setattr(site, "_shown", [])
    shown, other = AdvantageExplorer(rewards=(1, 0, 0, 0)), AdvantageExplorer(rewards=(1, 1, 0, 0))
    site.show(shown)
    site.show(other)
    before = len(handles[0].updates)
    first = next(iter(shown.controls.values()))
    first.value = first.options[-1] if hasattr(first, "options") else first.max
    assert len(handles[0].updates) == before + 1
    assert handles[1].updates == []  # the other explorer's figure did not change
    assert handles[0].updates[-1] != site._page_html(other.widget)


def test_a_live_figure_outside_site_mode_updates_nothing():
    live = LiveFigure(go.Figure(go.Scatter(y=[1])), backend="static")
    assert site._shown == [] and live.n_renders == 1  # render ran; nothing was shown, nothing to update


def test_activated_the_progress_bar_is_text_on_stdout_and_figures_use_the_site_renderer(monkeypatch):
    import io

    import plotly.io as pio
    import tqdm.auto

    monkeypatch.setattr(tqdm.auto, "tqdm", tqdm.auto.tqdm)  # put back after the test
    monkeypatch.setattr(pio.renderers, "default", pio.renderers.default)
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    site.activate()
    from tqdm.auto import tqdm as bar

    for _ in bar(range(3), desc="grpo", mininterval=0):
        pass
    assert "grpo: 100%" in out.getvalue() and "3/3" in out.getvalue()
    assert pio.renderers.default == site.RENDERER
