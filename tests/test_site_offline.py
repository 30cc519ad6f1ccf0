"""The site's file:// support without a browser (the browser check: tests/browser/test_site_file.py): the config
loads the Worker stand-in before the theme's bundle, the stand-in is an asset the site ships and acts on file://
only, the search index is written as the script the bundle loads there, and MathJax is told to request no font
the package does not ship."""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import site_pages  # noqa: E402


def test_the_worker_stand_in_is_loaded_before_the_bundle_and_acts_on_file_only():
    cfg = json.loads(site_pages.config([], Path("/tmp/out")))
    (polyfill,) = cfg["extra"]["polyfills"]  # material renders these in <head>, before its bundle
    shipped = site_pages.ASSETS / Path(polyfill).name
    assert polyfill.startswith("assets/") and shipped.is_file()
    text = shipped.read_text()
    assert 'if (location.protocol !== "file:") return;' in text and "window.Worker = " in text
    assert "offline" not in cfg["plugins"] and "search" in cfg["plugins"]  # material's offline plugin needs a CDN


def test_the_search_index_is_also_written_as_the_script_the_bundle_loads_from_file(tmp_path):
    index = {"config": {"lang": ["en"]}, "docs": [{"location": "glossary.html", "title": "Glossary", "text": "Bessel"}]}
    (tmp_path / "search").mkdir()
    (tmp_path / "search" / "search_index.json").write_text(json.dumps(index))
    out = site_pages.inline_search_index(tmp_path)
    assert out == tmp_path / "search" / "search_index.js"
    head, body = out.read_text().split(" = ", 1)
    assert head == "var __index" and json.loads(body.rstrip().rstrip(";")) == index


def test_mathjax_requests_no_font_the_package_does_not_ship():
    text = (site_pages.ASSETS / "rlnb-math.js").read_text()
    assert "src: \"local('MathJax_Blank')\"" in text  # its own source is about:blank
    for font in ("Caligraphic", "AMS", "Script", "Fraktur"):  # NativeMML's TeX fonts: not in jupyter-server-mathjax
        assert f'["{font}", ' in text
