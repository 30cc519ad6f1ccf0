"""The course website in Chromium: built from notebook 00 executed in smoke mode (what CI can afford; ``make site``
builds every chapter), served on localhost with every other address refused. The home page, one chapter and the
glossary are opened in the light and the dark scheme (switched with the page's own toggle): plotly figures must
be drawn with traces in the scheme's template, every page must say where its numbers come from, and the search
must find a glossary term. Screenshots go to test-artifacts/site/."""

import importlib.util
import os
from pathlib import Path

import pytest
from browser_site import FIGURES_JS, SiteServer, luminance, offline, scheme, toggle_scheme

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-artifacts" / "site"
PAGES = {"home": "index.html", "chapter": "chapters/00_start_here.html", "glossary": "glossary.html"}

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def build_site_module():
    spec = importlib.util.spec_from_file_location("build_site", ROOT / "scripts" / "build_site.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def site(browser_requirements, tmp_path_factory):
    pytest.importorskip("mkdocs_jupyter", reason="the site builder is not installed (pip install -e '.[site]')")
    built = os.environ.get("RLNB_SITE_BUILT")  # a site built already (python scripts/build_site.py --only 00)
    work = tmp_path_factory.mktemp("site")
    out = Path(built) if built else work / "site"
    if not built:
        runs = build_site_module().build(["00"], smoke=True, reuse=False, out=out, work=work)
        assert set(runs) == {"00_start_here"} and runs["00_start_here"]["mode"] == "smoke"
    server = SiteServer(out)
    yield server
    server.stop()


def open_page(page, site, name):
    refused = offline(page, site.url)
    page.goto(site.url + PAGES[name])
    page.wait_for_load_state("load")
    return refused


def wait_drawn(page, which: str) -> list[dict]:
    page.wait_for_function(f"""() => Array.from(document.querySelectorAll('.rlnb-figure'))
        .every(el => el.getAttribute('data-rlnb-drawn') === '{which}')""")
    return page.evaluate(FIGURES_JS)


@pytest.mark.parametrize("name", list(PAGES))
def test_each_page_draws_its_figures_in_light_and_dark(site, page, name):
    refused = open_page(page, site, name)
    note = page.locator(".rlnb-provenance")
    assert note.count() == 1, f"{name}: expected one note saying where the page's numbers come from"
    if name == "chapter":
        assert "Smoke-mode run" in note.inner_text()
    SHOTS.mkdir(parents=True, exist_ok=True)
    for which in ("light", "dark"):
        if scheme(page) != which:
            toggle_scheme(page)
        figures = wait_drawn(page, which)
        if name == "glossary":
            assert figures == [] and page.locator("h1").first.inner_text().startswith("Glossary")
            # equations typeset by the MathJax the site serves (no CDN), not left as TeX source
            page.locator(".arithmatex .MathJax").first.wait_for()
        else:
            assert figures, f"{name}: expected plotly figures on the page"
            assert all(f["plotted"] and f["traces"] > 0 for f in figures), f"{name} ({which}): {figures}"
            # the template follows the scheme: a light paper in light, a dark one in dark
            assert all((luminance(f["paper"]) > 0.5) == (which == "light") for f in figures), figures
            page.locator(".rlnb-figure").first.scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / f"{name}_{which}.png"))
    assert refused == [], f"{name}: the page asked for addresses outside the site: {refused}"
    assert page.rlnb_errors == [], page.rlnb_errors


def test_the_chapter_shows_its_widgets_last_state_and_no_widget_placeholder(site, page):
    open_page(page, site, "chapter")
    widgets = page.locator(".rlnb-widget")
    assert widgets.count() >= 2, "expected the dashboard and the explorers of 00 as static snapshots"
    assert widgets.first.locator(".rlnb-figure").count() == 1
    text = page.locator("article").inner_text()
    assert "application/vnd.jupyter.widget-view" not in text and "HBox(children" not in text


def test_the_search_finds_a_glossary_term(site, page):
    open_page(page, site, "home")
    page.locator("input.md-search__input").click()
    page.keyboard.type("Bessel")  # a glossary term; typed, since the search listens to keys
    results = page.locator(".md-search-result__item")
    results.first.wait_for()
    assert results.count() > 0
    assert any("glossary" in (results.nth(i).locator("a").first.get_attribute("href") or "")
               for i in range(results.count()))
