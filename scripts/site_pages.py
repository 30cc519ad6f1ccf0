"""The course website's pages other than the chapters, its mkdocs config and assets (used by build_site.py).

Every page opens with where its numbers come from: a chapter says which run made it (full or smoke mode, date,
machine); the home page's runtimes are the shipped full-mode measurements (docs/results/runtimes.json); a guide
says that the numbers it quotes are shipped results, the glossary and the cheat sheet that they carry none.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from measure_runtimes import machine  # noqa: F401  (one description of this machine; scripts/ is on sys.path)

ROOT = Path(__file__).resolve().parents[1]
DOCS, ASSETS = ROOT / "docs", ROOT / "docs" / "site"
RUNTIMES = DOCS / "results" / "runtimes.json"
# the guides, in the order a teacher reads them; None: the page carries no measured number
GUIDES = {"glossary": None, "cheatsheet": None, "teaching": "runtimes", "lab": "shipped", "knobs": None,
          "studies": "shipped", "kernels": "shipped", "reliability": "shipped", "scaling_up": "shipped"}
NOTES = {
    None: "Reference page: it carries no measured numbers.",
    "shipped": "Numbers on this page are shipped results: measured once by the scripts named next to them and "
               "stored in `docs/results/`; your own runs will differ within the seed noise they state.",
    "runtimes": "Timings on this page come from the shipped full-mode runtime measurements "
                "(`docs/results/runtimes.json`, {machines}, {dates}).",
}
SMOKE_NOTE = ("**Smoke-mode run**: the numbers and figures on this page come from the notebook executed with "
              "`RLNB_SMOKE=1` ({date}, {machine}, {seconds:.0f} s): a few steps at tiny sizes, which check that "
              "every cell runs but do not show the results the chapter teaches. Results the chapter loads from "
              "`docs/results/` are marked *shipped* where they appear. Run the notebook (or build the site with "
              "`python scripts/build_site.py --full`) for the full-mode numbers.")
FULL_NOTE = ("**Full-mode run**: the numbers and figures on this page come from the notebook executed top to bottom "
             "in full mode ({date}, {machine}, {seconds:.0f} s). Results it loads from `docs/results/` are marked "
             "*shipped* where they appear; a run of your own differs within the seed noise the chapter states.")


def _admonition(text: str, kind: str = "info") -> str:
    """The note as HTML (markdown inside a raw HTML block is not rendered, in a notebook or a page)."""
    import markdown

    return (f'<div class="admonition {kind} rlnb-provenance"><p class="admonition-title">Where these numbers come '
            f"from</p>{markdown.markdown(text)}</div>")


def run_note(run: dict) -> str:
    """The provenance note at the top of a chapter page."""
    text = (FULL_NOTE if run["mode"] == "full" else SMOKE_NOTE).format(**run)
    return _admonition(text, "success" if run["mode"] == "full" else "warning")


def _runtimes() -> dict:
    return json.loads(RUNTIMES.read_text()) if RUNTIMES.is_file() else {}


def guide_note(kind: str | None) -> str:
    rt = _runtimes()
    fields = {"machines": ", ".join(sorted({e["machine"] for e in rt.values()})) or "not measured",
              "dates": ", ".join(sorted({e["date"] for e in rt.values()}))}
    return _admonition(NOTES[kind].format(**fields), "note")


def chapter_links(text: str, names: set[str]) -> str:
    """`` `NN_name` `` in a guide -> a link to that chapter's page, where the chapter is in the site."""
    return re.sub(r"(?<!\[)`(\d\d_\w+)`", lambda m: f"[`{m.group(1)}`](chapters/{m.group(1)}.ipynb)"
                  if m.group(1) in names else m.group(0), text)


def _title(book: Path) -> str:
    first = json.loads(book.read_text())["cells"][0]["source"]
    line = ("".join(first) if isinstance(first, list) else first).splitlines()[0]
    return line.lstrip("# ").strip()


def runtime_figure(rt: dict) -> str:
    """The home page's figure: each chapter's shipped full-mode runtime, interactive like every figure here."""
    import plotly.graph_objects as go

    from rlnb.viz.site import figure_html

    names = sorted(rt)
    fig = go.Figure(go.Bar(x=[rt[n]["seconds"] / 60 for n in names], y=names, orientation="h",
                           marker_color="#0072B2", hovertemplate="%{y}: %{x:.1f} min<extra></extra>"))
    fig.update_layout(title="Each chapter's runtime in full mode (shipped measurement)", height=520,
                      xaxis_title="minutes on a 2-core laptop-class CPU", yaxis_autorange="reversed",
                      margin={"l": 220, "r": 20, "t": 60, "b": 50})
    return figure_html(fig)


def home(books: list[Path], runs: dict, mode: str) -> str:
    rt = _runtimes()
    rows = "\n".join(f"| [{_title(b)}](chapters/{b.name}) | "
                     f"{rt[b.stem]['seconds'] / 60:.1f} min |" if b.stem in rt else
                     f"| [{_title(b)}](chapters/{b.name}) | not measured |" for b in books)
    machines = ", ".join(sorted({e["machine"] for e in rt.values()})) or "not measured"
    dates = ", ".join(sorted({e["date"] for e in rt.values()}))
    note = (f"The chapters on this site were executed in **{mode} mode** ({len(runs)} of them; each page says "
            f"when and where). The runtimes below are the shipped full-mode measurements "
            f"(`docs/results/runtimes.json`: {machines}, {dates}).")
    return f"""# rlnb: reinforcement learning for LLM reasoning, one notebook per idea

{_admonition(note)}

Step through the sample -> reward -> advantage -> update loop of GRPO, PPO, DAPO and their relatives on a tiny
real model that trains on a laptop CPU. Every chapter is a Jupyter notebook; this site shows each one executed,
with its figures interactive (hover, zoom) and following the light or dark scheme (the toggle at the top).
The sliders of the notebooks' explorers need a kernel: here each shows the state it was left in.

To run the course: `make lab` in a clone of the repository (no GPU, no download), or offline from a wheelhouse
(the README's "Offline workshop"); `rlnb doctor` checks a laptop first. Teaching it: [the teacher's guide](teaching.md).
Reference: [glossary](glossary.md), [cheat sheet](cheatsheet.md).

## Chapters

| chapter | full-mode runtime (shipped) |
|---|---|
{rows}

{runtime_figure(rt) if rt else ""}
"""


def write_pages(src: Path, runs: dict, mode: str) -> None:
    """Home, guides and assets into ``src`` (the chapters are already there)."""
    books = sorted((src / "chapters").glob("*.ipynb"))
    names = {b.stem for b in books}
    (src / "index.md").write_text(home(books, runs, mode))
    for name, kind in GUIDES.items():
        text = (DOCS / f"{name}.md").read_text()
        head, _, rest = text.partition("\n")  # the note goes under the page's title
        (src / f"{name}.md").write_text(f"{head}\n\n{guide_note(kind)}\n{chapter_links(rest, names)}")
    if (DOCS / "images").is_dir():
        shutil.copytree(DOCS / "images", src / "images", dirs_exist_ok=True)
    assets = src / "assets"
    shutil.copytree(ASSETS, assets, dirs_exist_ok=True)
    import plotly
    import plotly.io as pio
    from plotly.io.json import to_json_plotly

    from rlnb.viz.figures.theme import TEMPLATES

    # plotly.js from the installed plotly package: the version that wrote the figures' JSON, and no CDN
    shutil.copy(Path(plotly.__file__).parent / "package_data" / "plotly.min.js", assets / "plotly.min.js")
    # the notebooks' own light and dark templates, which the page picks by its scheme
    templates = {k: pio.templates[t].to_plotly_json() for k, t in TEMPLATES.items()}
    (assets / "rlnb-templates.js").write_text(f"window.RLNB_TEMPLATES = {to_json_plotly(templates)};\n")
    try:  # MathJax 2 from pip (the 'site' extra): equations typeset with no CDN; without it they stay TeX source
        import jupyter_server_mathjax

        shutil.copytree(Path(jupyter_server_mathjax.__file__).parent / "static", assets / "mathjax", dirs_exist_ok=True)
    except ImportError:
        print("site: jupyter-server-mathjax is not installed: equations show as TeX source", flush=True)


def config(books: list[Path], out: Path) -> str:
    """mkdocs.yml of the staged sources (JSON is YAML): chapters in order, then the guides."""
    chapters = [{_title(ROOT / "notebooks" / b.name): f"chapters/{b.name}"} for b in books]
    titles = {"cheatsheet": "Cheat sheet", "teaching": "Teacher's guide", "knobs": "Knobs", "lab": "The lab"}
    guides = [{titles.get(n, n.replace("_", " ").capitalize()): f"{n}.md"} for n in GUIDES]
    cfg = {
        "site_name": "rlnb: RL for LLM reasoning", "docs_dir": "pages", "site_dir": str(out),
        "nav": [{"Home": "index.md"}, {"Chapters": chapters}, {"Guides": guides}],
        "theme": {"name": "material", "font": False,  # no Google Fonts: the site makes no outside request
                  "features": ["navigation.footer", "navigation.top", "search.highlight", "content.code.copy",
                               "toc.integrate"],  # the contents in the left column: the figures get its width
                  "palette": [
                      {"scheme": "default", "toggle": {"icon": "material/weather-night", "name": "Dark"}},
                      {"scheme": "slate", "toggle": {"icon": "material/weather-sunny", "name": "Light"}}]},
        "use_directory_urls": False,  # page.html links: the site reads from file:// too
        "plugins": ["search",
                    {"mkdocs-jupyter": {"execute": False, "include_source": True, "include_requirejs": False,
                                        "ignore_h1_titles": True}}],
        # arithmatex keeps markdown from reading _ and * inside $...$ as emphasis
        "markdown_extensions": ["tables", "admonition", "attr_list", "md_in_html", "toc",
                                {"pymdownx.arithmatex": {"generic": True}}],
        "extra_javascript": ["assets/plotly.min.js", "assets/rlnb-templates.js", "assets/rlnb-figures.js",
                             "assets/rlnb-math.js"],
        "extra_css": ["assets/rlnb.css"],
        # loaded before the theme's bundle: from file:// the search worker runs in an iframe (rlnb-file-worker.js)
        "extra": {"polyfills": ["assets/rlnb-file-worker.js"]},
    }
    return json.dumps(cfg, indent=1)


def inline_search_index(site: Path) -> Path:
    """``search/search_index.js``: the search index as a script, which mkdocs-material's bundle loads instead of
    fetching ``search_index.json`` when the page comes from file:// (a fetch there is refused)."""
    index = site / "search" / "search_index.json"
    out = index.with_suffix(".js")
    out.write_text(f"var __index = {index.read_text(encoding='utf-8')};\n", encoding="utf-8")
    return out
