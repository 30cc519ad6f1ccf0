"""Helpers of the site test: serve a built site on localhost, block every other address, flip the scheme with the
page's own toggle, and read what plotly drew."""

from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path

# what plotly drew in each figure element: its traces, and the scheme the site's script drew it in
FIGURES_JS = """() => Array.from(document.querySelectorAll('.rlnb-figure')).map(el => ({
    plotted: el.classList.contains('js-plotly-plot'),
    traces: el.querySelectorAll('.trace, .hm').length,  // .hm: a heatmap's drawn image
    drawn: el.getAttribute('data-rlnb-drawn'),
    paper: el.querySelector('.main-svg') ? getComputedStyle(el.querySelector('.main-svg')).backgroundColor : null,
}))"""


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the test's output is the assertions, not a request log
        pass


class SiteServer:
    """``site`` on http://127.0.0.1:<port>/ from a thread of this process (search needs http, not file://)."""

    def __init__(self, site: Path):
        handler = functools.partial(Quiet, directory=str(site))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def offline(page, base: str) -> list[str]:
    """Abort every request that does not go to ``base`` (or is inline data); returns the list it fills with the
    addresses it refused, so a test can assert the site asked for nothing outside itself."""
    refused: list[str] = []

    def route(r):
        url = r.request.url
        if url.startswith(base) or url.startswith(("data:", "blob:")):
            r.continue_()
        else:
            refused.append(url)
            r.abort()

    page.route("**/*", route)
    return refused


def scheme(page) -> str:
    return "dark" if page.evaluate("document.body.getAttribute('data-md-color-scheme')") == "slate" else "light"


def toggle_scheme(page) -> None:
    """Click the header's light/dark toggle (the visible one of mkdocs-material's two labels)."""
    before = scheme(page)
    page.locator("form[data-md-component=palette] label.md-header__button:visible").first.click()
    page.wait_for_function(f"document.body.getAttribute('data-md-color-scheme') {'==' if before == 'light' else '!='} 'slate'")


def luminance(color: str) -> float:
    """Relative brightness 0..1 of a computed CSS colour (``rgb(r, g, b)`` or ``rgba(...)``)."""
    rgb = [float(v) for v in color[color.index("(") + 1:color.index(")")].split(",")[:3]]
    return (0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]) / 255
