"""Tests of the browser test's checker: it must report widgets that do not render.

Three levels: the verdict (``problems``) on hand-written page descriptions (no browser); the page reader
(``DESCRIBE``) plus the verdict on static HTML with JupyterLab's output markup (Chromium, no server); and
the whole path on ``fixtures/broken_widgets.ipynb`` in JupyterLab, whose widgets fail on purpose.
"""

import math

import pytest
from browser_checks import DESCRIBE, WIDGET_MIME, counts, parse_readout, problems
from browser_drive import describe_settled, open_notebook, run_all, shutdown_kernel, wait_idle

# --- the verdict, on page descriptions ---------------------------------------------------------------------


def dom(**kw):
    base = {"mime": None, "text": "", "errorWidget": False, "loading": False, "empty": False, "widgets": 1,
            "sliders": [], "plots": [], "readouts": [], "explorers": []}
    return {**base, **kw}


def cell(index, *outputs):
    return {"index": index, "kind": "code", "outputs": list(outputs)}


def widget_out(d):
    return {"output_type": "display_data", "name": None, "text": "", "ename": None, "evalue": None,
            "mimes": [WIDGET_MIME, "text/plain"], "dom": d}


DRAWN = {"traces": 3, "points": [5, 5, 5], "names": ["a", "b", "c"], "svg": True, "visible": True}


def test_verdict_accepts_rendered_widgets_and_counts_them():
    cells = [cell(0, widget_out(dom(sliders=[{"name": "eps_high", "value": "0.20"}], plots=[DRAWN],
                                    explorers=[{"title": "Clip explorer", "plots": 1}])))]
    assert problems(cells) == []
    assert counts(cells) == {"sliders": 1, "plots": 1, "widgets": 1}


def test_verdict_reports_each_kind_of_broken_output():
    err = {"output_type": "error", "name": None, "text": "", "ename": "ValueError", "evalue": "eps_low: expected",
           "mimes": [], "dom": None}
    tb = {"output_type": "stream", "name": "stderr", "text": "Traceback (most recent call last):\n  boom",
          "ename": None, "evalue": None, "mimes": [], "dom": None}
    warning = {**tb, "text": "UserWarning: something mild"}
    cells = [cell(1, err), cell(2, tb, warning),
             cell(3, widget_out(dom(errorWidget=True, text="Click to show javascript error."))),
             cell(4, widget_out(dom(loading=True, text="Loading widget..."))),
             cell(5, widget_out(dom(empty=True, widgets=0))),
             cell(6, widget_out(dom(plots=[{**DRAWN, "svg": False}]))),
             cell(7, widget_out(dom(explorers=[{"title": "KL explorer", "plots": 0}]))),
             cell(8, widget_out(None))]
    found = problems(cells)
    assert [p.split(":")[0] for p in found] == [f"cell {i}" for i in (1, 2, 3, 4, 5, 6, 7, 8)]
    assert "ValueError" in found[0] and "Traceback" in found[1]
    assert "failed to render" in found[2] and "Loading widget" in found[3] and "rendered empty" in found[4]
    assert "no drawing" in found[5] and "'KL explorer' shows a readout but no figure" in found[6]
    assert "no rendered element" in found[7]


def test_parse_readout():
    got = parse_readout("clip_ratio/low_mean = 0.0286 · tokens = 70 · loss = nan")
    assert list(got) == ["clip_ratio/low_mean", "tokens", "loss"]
    assert got["clip_ratio/low_mean"] == 0.0286 and got["tokens"] == 70.0 and math.isnan(got["loss"])
    # the dashboard's "step 3 · reward 0.250" has no "=": only "key = value" items are read
    assert parse_readout("step 3 · reward 0.250 · last coef = 0.0010 · mode = ppo_clip") == {
        "last coef": 0.001, "mode": "ppo_clip"}


# --- the page reader and the verdict, on static HTML in Chromium -------------------------------------------

SLIDER = ('<div class="lm-Widget jupyter-widgets widget-inline-hbox widget-slider widget-hslider">'
          '<label class="widget-label">eps_high</label><div class="slider-container"><div class="slider">'
          '<div class="noUi-handle" tabindex="0"></div></div></div><div class="widget-readout">0.20</div></div>')
ERROR_WIDGET = ('<div class="lm-Widget jupyter-widgets"><div class="jupyter-widgets-error-widget icon-error">'
                '<svg width="20" height="20"></svg><pre>Click to show javascript error.</pre></div></div>')
PLOT = '<div class="lm-Widget js-plotly-plot" id="{id}" style="height:50px">{svg}</div>'


def page_html(*outputs):
    """A notebook page with one cell per output, in JupyterLab's markup (a widget view is wrapped in a
    ``jp-OutputArea-output`` panel; an output that is already one, e.g. rendered text, is used as is)."""
    wrap = lambda o: o if "jp-OutputArea-output" in o else f'<div class="lm-Widget lm-Panel jp-OutputArea-output">{o}</div>'  # noqa: E731
    cells = "".join(f'<div class="jp-Cell jp-CodeCell"><div class="jp-OutputArea"><div class="jp-OutputArea-child">'
                    f'{wrap(o)}</div></div></div>' for o in outputs)
    return f'<html><body><div class="jp-Notebook">{cells}</div></body></html>'


def explorer(plot: str) -> str:
    return ('<div class="lm-Widget lm-Panel jupyter-widgets widget-container widget-box widget-vbox">'
            '<div class="lm-Widget jupyter-widgets widget-html"><div class="widget-html-content"><b>Clip explorer</b>'
            '</div></div><div class="widget-hbox">' + SLIDER + '</div>'
            '<div class="lm-Widget jupyter-widgets widget-html"><div class="widget-html-content">'
            '<code class="rlnb-readout">tokens = 70</code></div></div>' + plot + '</div>')


@pytest.mark.browser
def test_reader_on_static_html(page):
    drawn = PLOT.format(id="good", svg='<svg class="main-svg" width="10" height="10"></svg>')
    undrawn = PLOT.format(id="bad", svg="")
    page.set_content(page_html(explorer(drawn), SLIDER, ERROR_WIDGET, '<div class="lm-Widget"></div>',
                               "Loading widget...", undrawn, explorer(""),
                               '<div class="jp-RenderedText jp-OutputArea-output" data-mime-type="application/vnd.jupyter.stdout">'
                               "<pre>Error displaying widget is only a printed string</pre></div>"))
    page.evaluate("() => { document.getElementById('good').data = [{name: 'a', x: [1, 2], y: [3, 4]}];"
                  " document.getElementById('bad').data = [{name: 'b', x: [1], y: [1]}]; }")
    cells = page.evaluate(DESCRIBE, ".jp-Notebook")
    assert [c["outputs"][0]["dom"]["explorers"] for c in cells[:1]] == [[{"title": "Clip explorer", "plots": 1}]]
    assert cells[0]["outputs"][0]["dom"]["plots"][0]["points"] == [2]
    assert parse_readout(cells[0]["outputs"][0]["dom"]["readouts"][0]) == {"tokens": 70.0}
    found = problems(cells)
    assert [p.split(":")[0] for p in found] == ["cell 2", "cell 3", "cell 4", "cell 5", "cell 5", "cell 6"], found
    assert "failed to render" in found[0] and "rendered empty" in found[1] and "Loading widget" in found[2]
    assert "rendered empty" in found[3] and "no drawing" in found[4] and "readout but no figure" in found[5]
    assert counts(cells)["sliders"] == 3 and counts(cells)["plots"] == 1


# --- the whole path, on a notebook whose widgets fail on purpose --------------------------------------------


@pytest.mark.browser
def test_checker_reports_widgets_that_fail_in_jupyterlab(lab, page):
    open_notebook(page, lab.url("lab/tree/fixtures/broken_widgets.ipynb"))
    assert run_all(page, timeout_s=120) == {"ok": True}  # the kernel sees no error: only the page can tell
    wait_idle(page, timeout_s=60)
    cells = describe_settled(page)
    shutdown_kernel(page)
    found = problems(cells)
    assert [p.split(":")[0] for p in found] == ["cell 2", "cell 3", "cell 4", "cell 6"], found
    assert "failed to render" in found[0]      # NotInstalled(): its frontend module is missing
    assert "failed to render" in found[1]      # the same inside a VBox next to a fine slider
    assert "rendered empty" in found[2]        # an anywidget whose render() throws
    assert "'Clip explorer' shows a readout but no figure" in found[3]  # its live figure's render() throws
    assert any("render failed on purpose" in e for e in page.rlnb_errors)
    assert any("figure failed on purpose" in e for e in page.rlnb_errors)
    # the slider beside the broken child, the fine one, and the clip explorer's (its controls did render)
    assert counts(cells)["sliders"] >= 3 and counts(cells)["plots"] == 0
