"""Build the course website: every notebook executed, as a page with its figures interactive, plus the glossary,
the cheat sheet and the guides in docs/. Offline: nothing is fetched, plotly.js is served by the site itself.

    python scripts/build_site.py                   # every notebook in smoke mode -> build/site/ (make site)
    python scripts/build_site.py --full            # full mode: the numbers the chapters teach (about 14 min of notebooks on 2 cores)
    python scripts/build_site.py --only 00 03      # a few notebooks (the CI test); the others are left out
    python scripts/build_site.py --reuse           # keep executed notebooks newer than their source notebook

Open build/site/index.html in a browser: pages, figures, equations, the light/dark toggle and the search all work
from file:// (a USB stick, no server), or serve it: ``python -m http.server -d build/site 8000``. From file://
browsers start no web worker, which mkdocs-material's search runs in, and refuse the fetch of its index: the site
ships the index as a script (``search/search_index.js``) and runs the worker in an iframe
(``docs/site/rlnb-file-worker.js``); mkdocs-material's ``offline`` plugin does the same with a shim it fetches
from a CDN, so it is not used. Why mkdocs-material with mkdocs-jupyter: both install from pip with no node
toolchain, build offline, and give chapter navigation, a light/dark toggle and a search built into the page. The
notebooks are executed here, not by the plugin, with ``RLNB_SITE=1`` (``rlnb.viz.site``): figures leave the
notebook as theme-free plotly JSON that ``docs/site/rlnb-figures.js`` draws in the page's scheme.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import site_pages  # noqa: E402  (scripts/ is not a package)

BUILD = ROOT / "build"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def notebooks(only: list[str]) -> list[Path]:
    books = sorted((ROOT / "notebooks").glob("*.ipynb"))
    if only:
        books = [b for b in books if b.stem in only or b.stem[:2] in only]
        if not books:
            raise SystemExit(f"--only: no notebook matches {only} (give 2-digit numbers or names)")
    return books


def execute(src: Path, dest: Path, smoke: bool) -> float:
    """Run ``src`` top to bottom in site mode into ``dest``; returns the seconds it took."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(src, as_version=4)
    env = {"RLNB_SITE": "1", "RLNB_SMOKE": "1" if smoke else "0", "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "OMP_WAIT_POLICY": "PASSIVE",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel inherits this process's environment
    t0 = time.perf_counter()
    try:
        NotebookClient(nb, timeout=1800, kernel_name="python3",
                       resources={"metadata": {"path": str(src.parent)}}).execute()
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    dest.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, dest)
    return time.perf_counter() - t0


def _last_line_state(text: str) -> str:
    """A text progress bar's final state: of each line rewritten with carriage returns, the last version."""
    return "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))


def _coalesce(outputs: list) -> list:
    """Consecutive writes to one stream as one output (a text bar sends one write per redraw)."""
    merged = []
    for out in outputs:
        prev = merged[-1] if merged else None
        if out.get("output_type") == "stream" and prev is not None and prev.get("output_type") == "stream" \
                and prev.get("name") == out.get("name"):
            prev["text"] += out["text"]
        else:
            merged.append(out)
    return merged


def clean_outputs(nb) -> None:
    """What a static page can show: widget views lose their view (their text stays), text bars their redraws."""
    for cell in nb.cells:
        if "outputs" in cell:
            cell.outputs = _coalesce(cell.outputs)
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                out["text"] = _last_line_state(out["text"])
            data = out.get("data")
            if data and WIDGET_VIEW in data:
                data.pop(WIDGET_VIEW)
                if not data:
                    data["text/plain"] = ""
        cell.get("metadata", {}).pop("widgets", None)
    nb.metadata.pop("widgets", None)


def link_pages(text: str) -> str:
    """Notebook links as site links (mkdocs rewrites links in markdown pages, not in notebooks, so these are the
    final addresses; the offline plugin makes every page ``name.html``): ``NN_name.ipynb`` -> its page,
    ``../docs/x.md`` -> the page of x."""
    text = re.sub(r"\]\((?:\.\./notebooks/)?(\d\d_\w+)\.ipynb", r"](\1.html", text)
    return re.sub(r"\]\(\.\./docs/([\w-]+)\.md", r"](../\1.html", text)


def page_notebook(executed: Path, dest: Path, provenance: str) -> None:
    """The executed notebook as a site page: outputs a page can show, site links, the provenance note first."""
    import nbformat

    nb = nbformat.read(executed, as_version=4)
    clean_outputs(nb)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = link_pages(cell.source)
    nb.cells.insert(1, nbformat.v4.new_markdown_cell(provenance))
    dest.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, dest)


def build(only: list[str], smoke: bool, reuse: bool, out: Path, work: Path = BUILD) -> dict:
    """Execute (or reuse) the notebooks, stage the pages in ``work``, run mkdocs into ``out``; returns each chapter's
    run: mode, seconds, date and machine."""
    mode = "smoke" if smoke else "full"
    stage, cache = work / "site-src", work / f"site-executed-{mode}"
    src = stage / "pages"  # mkdocs' docs_dir: the staged pages
    shutil.rmtree(stage, ignore_errors=True)
    runs, books = {}, notebooks(only)
    for book in books:
        executed, record = cache / book.name, cache / f"{book.stem}.json"  # the run's mode, time and machine
        # reuse compares with the notebook only: after changing rlnb itself, build without --reuse
        if reuse and record.is_file() and executed.is_file() and executed.stat().st_mtime > book.stat().st_mtime:
            print(f"{book.stem}: reusing {executed}", flush=True)
        else:
            print(f"{book.stem}: executing in {mode} mode ...", flush=True)
            seconds = execute(book, executed, smoke)
            now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
            record.write_text(json.dumps({"mode": mode, "seconds": round(seconds, 1), "date": now,
                                          "machine": site_pages.machine()}))
        runs[book.stem] = json.loads(record.read_text())
        page_notebook(executed, src / "chapters" / book.name, site_pages.run_note(runs[book.stem]))
    site_pages.write_pages(src, runs, mode)
    (stage / "mkdocs.yml").write_text(site_pages.config(books, out))
    t0 = time.perf_counter()
    # cwd: mkdocs-jupyter keeps a cache folder in the working directory; in build/, not in the repository
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "-q", "-f", str(stage / "mkdocs.yml")], check=True, cwd=stage,
                   env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    site_pages.inline_search_index(out)  # the search from file://
    print(f"site: {len(books)} chapters ({mode} mode) in {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}/ "
          f"(mkdocs {time.perf_counter() - t0:.0f} s); open index.html", flush=True)
    return runs


# the site extra's modules (pyproject.toml's [site]) and what executes the notebooks
SITE_MODULES = ("mkdocs", "material", "mkdocs_jupyter", "nbclient", "nbformat")  # mathjax: optional


def missing_extra() -> list[str]:
    """The modules of ``SITE_MODULES`` that cannot be imported here."""
    import importlib.util

    return [m for m in SITE_MODULES if importlib.util.find_spec(m) is None]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--full", action="store_true", help="execute in full mode (the chapters' real numbers)")
    ap.add_argument("--only", nargs="+", default=[], metavar="NN", help="only these notebooks (2-digit numbers)")
    ap.add_argument("--reuse", action="store_true", help="keep executed notebooks newer than their source")
    ap.add_argument("--out", type=Path, default=BUILD / "site", help="where the site goes (default build/site)")
    args = ap.parse_args(argv)
    missing = missing_extra()
    if missing:  # found now, not after executing every chapter (minutes) when mkdocs is first called
        print(f"build_site: the site extra is missing (no module {', '.join(missing)}); install it with "
              "pip install -e '.[site]' (make site does)", file=sys.stderr)
        return 2
    build(args.only, smoke=not args.full, reuse=args.reuse, out=args.out.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
