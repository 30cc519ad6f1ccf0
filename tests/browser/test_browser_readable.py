"""Tests of the readability verdict: each kind of unreadable output is reported, a readable page is not.

Two levels: the verdict on hand-written page descriptions (no browser), and the page reader plus the verdict on
a static page where plotly.js draws real figures (Chromium, no server).
"""

from pathlib import Path

import plotly
import pytest
from browser_checks import DESCRIBE
from browser_readable import is_raw_key, long_numbers, readability_problems
from test_browser_checks import cell, dom, page_html, widget_out

TITLED = {"axes": [{"id": "x", "title": "training step"}, {"id": "y", "title": "mean reward"}],
          "legend": ["mean reward", "held-out pass@1 (greedy)"], "annotations": ["reward and pass@1"]}


def text_out(text: str, lines: int = 1):
    d = dom(mime="application/vnd.jupyter.stdout", prose=text, lines=lines, widgets=0)
    return {"output_type": "stream", "name": "stdout", "text": text, "ename": None, "evalue": None, "mimes": [],
            "dom": d}


def test_a_readable_page_passes():
    cells = [cell(0, widget_out(dom(plots=[TITLED], prose="step 3 · reward 0.125 · A = -0.354", tables=[8]))),
             cell(1, text_out("pass@1 0.375 -> 0.340 in 2.13.0", lines=12))]
    assert readability_problems(cells) == []


def test_each_planted_problem_is_reported():
    untitled = {**TITLED, "axes": [{"id": "x", "title": ""}, {"id": "y", "title": "mean reward"},
                                   {"id": "x2", "title": ""}]}
    raw = {**TITLED, "legend": ["clip_ratio/low_mean", "mean reward"]}
    cells = [cell(0, widget_out(dom(plots=[untitled]))),
             cell(1, widget_out(dom(plots=[raw]))),
             cell(2, text_out("advantages [-0.3535524010658264, 0.3535524010658264]")),
             cell(3, widget_out(dom(tables=[64]))),
             cell(4, widget_out(dom(redBars=1))),
             cell(5, text_out("\n".join(["{'step': 1}"] * 80), lines=80))]
    found = readability_problems(cells)
    assert [p.split(":")[0] for p in found] == [f"cell {i}" for i in range(6)], found
    assert "axis x, x2 has no title" in found[0]
    assert "['clip_ratio/low_mean']" in found[1]
    assert "-0.3535524010658264" in found[2]
    assert "64 visible rows" in found[3] and "red" in found[4] and "80 lines" in found[5]


def test_raw_keys_and_long_numbers():
    assert [is_raw_key(s) for s in ("clip_ratio/low_mean", "frac_reward_zero_std", "hp/beta", "rewards/x/mean")] \
        == [True] * 4
    assert [is_raw_key(s) for s in ("reward", "entropy", "mean reward", "pass@1", "eps_low", "beta=0: reward")] \
        == [False] * 6
    assert long_numbers("0.17999999999999994 1.2345678e-05 v2.13.0 0.1250 1234.5 0.000123456 arXiv 1707.06347") \
        == ["0.17999999999999994", "1.2345678e-05"]


PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
DRAW = """() => {
  Plotly.newPlot('bare', [{x: [1, 2], y: [3, 4], name: 'clip_ratio/low_mean'}, {x: [1, 2], y: [1, 2], name: 'b'}],
                 {showlegend: true});
  Plotly.newPlot('good', [{x: [1, 2], y: [3, 4], name: 'mean reward'}, {x: [1, 2], y: [1, 2], name: 'pass@1'}],
                 {xaxis: {title: {text: 'training step'}}, yaxis: {title: {text: 'share'}}});
}"""


@pytest.mark.browser
def test_reader_and_verdict_on_real_figures(page):
    rows = "<tr><th>head</th></tr>" + "".join(f"<tr><td>{i}</td></tr>" for i in range(64))
    stdout = ('<div class="jp-RenderedText jp-OutputArea-output" data-mime-type="application/vnd.jupyter.stdout">'
              "<pre>{}</pre></div>")
    page.set_content(page_html('<div id="bare" class="js-plotly-plot"></div>',
                               '<div id="good" class="js-plotly-plot"></div>',
                               f"<table>{rows}</table>",
                               stdout.format("A = -0.3535524010658264"),
                               stdout.format("\n".join(["row"] * 70)),
                               '<div><code>x = 0.17999999999999994</code> in code is fine</div>'))
    page.add_script_tag(path=str(PLOTLY_JS))
    page.evaluate(DRAW)
    cells = page.evaluate(DESCRIBE, ".jp-Notebook")
    found = readability_problems(cells)
    assert [p.split(":")[0] for p in found] == ["cell 0", "cell 0", "cell 2", "cell 3", "cell 4"], found
    assert "axis x, y has no title" in found[0] and "clip_ratio/low_mean" in found[1]
    assert "64 visible rows" in found[2] and "-0.3535524010658264" in found[3] and "70 lines" in found[4]


def test_contrast_verdict_groups_by_cell():
    from browser_contrast import contrast_problems

    found = [{"cell": 2, "text": "right", "ratio": 1.4}, {"cell": 2, "text": "wrong", "ratio": 1.1},
             {"cell": 5, "text": "grey", "ratio": 2.5}]
    assert contrast_problems(found) == [
        "cell 2: 2 texts below contrast 3.0 in the dark theme, worst 1.1 on 'wrong'",
        "cell 5: 1 texts below contrast 3.0 in the dark theme, worst 2.5 on 'grey'"]
    assert contrast_problems([]) == []


@pytest.mark.browser
def test_contrast_reader_finds_light_page_colours_on_a_dark_page(page):
    from browser_contrast import CONTRAST, contrast_problems

    page.set_content(page_html('<div style="color:#fff;background:#f4c7c3">white on a pink row</div>',
                               '<div style="color:#444">dark grey text</div>',
                               '<div style="color:#eee">light text</div>',
                               '<div style="color:#eee"><svg><text>figure text is plotly\'s</text></svg></div>'))
    page.evaluate("() => { document.body.style.background = '#111'; }")   # a dark page
    found = contrast_problems(page.evaluate(CONTRAST, ".jp-Notebook"))
    assert [p.split(":")[0] for p in found] == ["cell 0", "cell 1"], found
    assert "white on a pink row" in found[0] and "dark grey text" in found[1]


THEMED = """(dark) => {
  document.body.dataset.jpThemeLight = dark ? 'false' : 'true';
  document.body.style.background = dark ? '#111' : '#fff';
  for (const [id, tpl] of [['light', 'plotly_white'], ['dark', 'plotly_dark']])
    Plotly.newPlot(id, [{x: [1, 2], y: [3, 4], name: 'mean reward'}], TEMPLATES[tpl]);
}"""


@pytest.mark.browser
@pytest.mark.parametrize("styled", [False, True])
def test_figures_follow_the_dark_theme_only_with_the_page_style(page, styled):
    """A figure built in the light template stays a white box on the dark page unless the page style repaints it;
    with the style both figures (either template) are dark with readable text."""
    import json

    import plotly.io as pio
    from browser_contrast import FIGURES, figure_problems

    from rlnb.viz.figures import page_style

    style = page_style.html() if styled else ""
    page.set_content(page_html(f'{style}<div id="light" class="js-plotly-plot"></div>',
                               '<div id="dark" class="js-plotly-plot"></div>'))
    page.add_script_tag(path=str(PLOTLY_JS))
    templates = {t: {"template": pio.templates[t].to_plotly_json(), "xaxis": {"title": {"text": "step"}}}
                 for t in ("plotly_white", "plotly_dark")}
    page.evaluate(f"() => {{ window.TEMPLATES = {json.dumps(templates)}; }}")
    page.evaluate(THEMED, True)
    found = figure_problems(page.evaluate(FIGURES, ".jp-Notebook"))
    if not styled:
        assert found == ["cell 0: 1 plotly figures stay light in the dark theme (background luminance 1)"], found
        return
    assert found == []
    page.evaluate(THEMED, False)                                   # and back: the dark-built figure turns light
    figures = page.evaluate(FIGURES, ".jp-Notebook")
    assert [f["bg"] for f in figures] == [1, 1] and min(f["text"] for f in figures) >= 3, figures
