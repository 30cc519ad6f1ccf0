"""The course website opened from file:// in Chromium, as from a USB stick with no server (issue 41: the light/dark
toggle was dead, the search threw, two MathJax fonts were missing). Built from notebook 00 in smoke mode (or
RLNB_SITE_BUILT, a site built already). On the home page, the chapter and the glossary: no page or console error, no
request that fails or leaves file://; the toggle flips the scheme; the search finds a glossary term; the glossary's
equations are typeset."""

import importlib.util
import os
from pathlib import Path

import pytest
from browser_site import scheme, toggle_scheme

ROOT = Path(__file__).resolve().parents[2]
PAGES = {"home": "index.html", "chapter": "chapters/00_start_here.html", "glossary": "glossary.html"}

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def site(browser_requirements, tmp_path_factory) -> Path:
    pytest.importorskip("mkdocs_jupyter", reason="the site builder is not installed (pip install -e '.[site]')")
    if os.environ.get("RLNB_SITE_BUILT"):
        return Path(os.environ["RLNB_SITE_BUILT"]).resolve()
    spec = importlib.util.spec_from_file_location("build_site", ROOT / "scripts" / "build_site.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    work = tmp_path_factory.mktemp("site")
    mod.build(["00"], smoke=True, reuse=False, out=work / "site", work=work)
    return work / "site"


def open_file(page, site: Path, name: str) -> dict:
    """Open one page from file://; returns the lists it fills: requests refused (not file://) and failed."""
    seen = {"outside": [], "failed": []}

    def refuse(r):
        seen["outside"].append(r.request.url)
        r.abort()

    # only what is not on the machine is intercepted (a frame's about:blank is not a request to continue)
    page.route(lambda url: not url.startswith(("file://", "data:", "blob:", "about:")), refuse)
    page.on("requestfailed", lambda r: seen["failed"].append(f"{r.url} ({r.failure})"))
    page.goto((site / PAGES[name]).as_uri())
    page.wait_for_load_state("load")
    return seen


def clean(page, seen: dict, name: str) -> None:
    assert seen["outside"] == [], f"{name}: requests that leave the machine: {seen['outside']}"
    assert seen["failed"] == [], f"{name}: requests that failed (a missing asset): {seen['failed']}"
    assert page.rlnb_errors == [], f"{name}: {page.rlnb_errors}"
    assert page.rlnb_console == [], f"{name}: console errors {page.rlnb_console}"


@pytest.mark.parametrize("name", list(PAGES))
def test_from_file_the_toggle_flips_the_scheme_and_nothing_fails(site, page, name):
    seen = open_file(page, site, name)
    attribute = "document.body.getAttribute('data-md-color-scheme')"
    before = page.evaluate(attribute)
    toggle_scheme(page)  # waits until the attribute changes: a dead toggle times out here
    after = page.evaluate(attribute)
    assert {before, after} == {"default", "slate"}, (before, after)
    toggle_scheme(page)
    assert scheme(page) == ("dark" if before == "slate" else "light")
    if name == "glossary":  # typeset by the MathJax the site ships, its fonts included
        page.locator(".arithmatex .MathJax").first.wait_for()
    if name != "glossary":
        page.locator(".rlnb-figure[data-rlnb-drawn]").first.wait_for()
    page.wait_for_timeout(500)  # late font and script requests
    clean(page, seen, name)


def test_from_file_the_search_finds_a_glossary_term(site, page):
    seen = open_file(page, site, "home")
    page.locator("input.md-search__input").click()
    page.keyboard.type("Bessel")  # a glossary term; typed, since the search listens to keys
    results = page.locator(".md-search-result__item")
    results.first.wait_for()
    hrefs = [results.nth(i).locator("a").first.get_attribute("href") or "" for i in range(results.count())]
    assert any("glossary" in h for h in hrefs), hrefs
    clean(page, seen, "home (search)")
