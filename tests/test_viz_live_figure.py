"""``LiveFigure`` and ``PlotView``: what the page is sent is the whole figure, coalesced, with its caption.

The browser side (drawn, reloaded, re-displayed under load) is tests/browser/test_live_figures.py.
"""

import json
import threading
import time

import plotly.graph_objects as go
import pytest
from ipywidgets import HTML

from rlnb.viz.backend import LiveFigure, figure_json
from rlnb.viz.figures.train import dashboard_figure
from rlnb.viz.plotview import PlotlyJS, PlotView, library_source, plotly_js


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def line(n, name="y"):
    return go.Figure(go.Scatter(x=list(range(n)), y=[float(k * k) for k in range(n)], name=name))


def shown(live):
    return json.loads(live.view.figure)


def test_the_view_holds_the_whole_figure_and_its_version():
    live = LiveFigure(line(3), backend="widget")
    assert isinstance(live.view, PlotView) and live.view.version == live.version == 1
    assert shown(live)["data"][0]["name"] == "y" and "template" not in shown(live)["layout"]
    assert json.loads(live.view.template)["layout"]                    # the theme, sent on its own
    live.update(line(5), now=True)
    assert live.view.version == 2 and len(shown(live)["data"][0]["x"]) == 5


def test_updates_inside_the_interval_are_coalesced_into_the_newest():
    clock = Clock()
    # a 10 s interval: the real timer thread behind the fake clock must not fire while ten updates are built on a
    # busy machine (at 0.25 s it did, once: the test then saw a send the interval had not yet allowed)
    live = LiveFigure(line(1), backend="widget", max_fps=0.1, clock=clock, caption=HTML())
    for n in range(2, 12):                                   # 10 updates within one interval
        live.update(line(n), caption=f"<code>{n}</code>")
    assert live.view.version == 1 and live.pending           # none sent yet: the first send was at t=100
    clock.t += 10
    live.flush()
    assert live.view.version == 2 and not live.pending        # one send for the ten
    assert len(shown(live)["data"][0]["x"]) == 11 and live.caption.value == "<code>11</code>"


def test_a_waiting_update_is_sent_by_the_timer():
    live = LiveFigure(line(1), backend="widget", max_fps=20)  # 50 ms interval, real clock
    live.update(line(2))
    live.update(line(3))
    deadline = time.monotonic() + 5
    while live.pending and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not live.pending and live.view.version >= 2 and len(shown(live)["data"][0]["x"]) == 3


def test_the_caption_changes_only_with_its_figure():
    clock, cap = Clock(), HTML("start")
    live = LiveFigure(line(1), backend="widget", clock=clock, caption=cap)
    clock.t += 10
    live.update(line(2), caption="step 2")
    assert cap.value == "step 2" and len(shown(live)["data"][0]["x"]) == 2
    live.update(line(3), caption="step 3")                   # inside the interval: both wait
    assert cap.value == "step 2" and len(shown(live)["data"][0]["x"]) == 2
    live.refresh_view()                                      # displaying the view sends both
    assert cap.value == "step 3" and len(shown(live)["data"][0]["x"]) == 3


def test_updates_from_threads_are_all_delivered_in_the_end():
    live = LiveFigure(line(1, "a"), backend="widget", max_fps=50)
    threads = [threading.Thread(target=lambda k=k: [live.update(line(n, "a")) for n in range(2, 40 + k)])
               for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    live.flush()
    assert not live.pending and shown(live)["data"][0]["x"] == list(live.fig.data[0].x)


def test_nan_is_sent_as_null_and_numpy_arrays_as_plotly_typed_arrays():
    import numpy as np

    fig = go.Figure(go.Scatter(x=np.arange(3), y=[1.0, float("nan"), 2.0]))
    data, _ = figure_json(fig)
    d = json.loads(data)                                     # strict JSON: NaN would not parse in the page
    assert d["data"][0]["y"] == [1.0, None, 2.0] and set(d["data"][0]["x"]) == {"dtype", "bdata"}


def test_every_view_refers_to_one_plotly_js():
    a, b = PlotView(), PlotView()
    assert a.lib is b.lib is plotly_js() and isinstance(a.lib, PlotlyJS)
    src = library_source()
    assert "module.exports" in src and src.rstrip().endswith("export default module.exports;")
    assert a.lib.source == src and len(a.lib._esm) < 2000                # the model's own module stays small
    assert len(src) > 1_000_000                                # plotly.js itself, from the plotly package
    a.lib.close()
    assert plotly_js() is not a.lib and plotly_js().comm is not None  # a closed one is replaced


def test_reveal_asks_the_page_and_the_static_backend_ignores_it(monkeypatch):
    sent = []
    live = LiveFigure(line(2), backend="widget")
    monkeypatch.setattr(live.view, "send", lambda content, buffers=None: sent.append(content))
    live.reveal()
    assert sent == [{"type": "reveal"}]
    LiveFigure(line(2), backend="static").reveal()           # no view to scroll: nothing happens, no error


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="max_fps"):
        LiveFigure(line(2), backend="widget", max_fps=0)
    with pytest.raises(ValueError, match="backend"):
        LiveFigure(line(2), backend="svg")


def test_identical_curves_in_one_panel_are_drawn_once_named_for_both():
    same = ([1, 2, 3], [0.0, 0.5, 1.0])
    fig = dashboard_figure(series={"reward": same, "accuracy": same}, panels=[("reward", ("reward", "accuracy"))])
    shown_traces = [t for t in fig.data if t.visible]
    assert len(shown_traces) == 1 and " = " in shown_traces[0].name
    fig = dashboard_figure(series={"reward": same, "accuracy": ([1, 2, 3], [0.0, 0.5, 0.9])},
                           panels=[("reward", ("reward", "accuracy"))])
    assert all(t.visible for t in fig.data) and all(" = " not in t.name for t in fig.data)


def test_the_view_is_made_holding_the_figure_and_resends_it_when_the_page_asks(monkeypatch):
    live = LiveFigure(line(4), backend="widget")
    assert live.view.version == 1 and len(shown(live)["data"][0]["x"]) == 4  # in the widget's opening state
    sent = []
    monkeypatch.setattr(live.view, "send_state", lambda key=None: sent.append(key))
    live.view._handle_custom_msg({"type": "sync"}, [])
    live.view._handle_custom_msg({"type": "something else"}, [])
    assert sent == [["figure", "template", "version"]] and live.view.n_syncs == 1
