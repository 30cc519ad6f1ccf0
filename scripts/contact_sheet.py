"""Screenshots of executed notebooks in JupyterLab (Chromium), light and dark, and one contact sheet per notebook.

    python scripts/contact_sheet.py                 # every notebook, run in the browser in full mode
    python scripts/contact_sheet.py --smoke 04 09   # some of them, in smoke mode (a minute each)
    python scripts/contact_sheet.py --saved 04      # as saved by `measure_runtimes.py --save test-artifacts/executed`

Each notebook is run in JupyterLab (Run All, as a learner would: widgets are live; JupyterLab 4 does not draw
widgets from a saved notebook's state, so ``--saved`` shows their text instead) and photographed a screen at a
time in the light and the dark theme (the kernel's ``rlnb.viz.set_theme`` follows): the pages go to ``test-artifacts/contact/<notebook>/`` at full size,
for reading them; a contact sheet of all pages (a grid of thumbnails, JPEG) goes to
``docs/images/contact/<notebook>_<theme>.jpg``, small enough to keep in the repository.

Needs ``/usr/bin/chromium`` and playwright (``pip install -e '.[browser]'``), like the browser test.
"""

from __future__ import annotations

import base64
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "browser"))  # the browser test's server and page helpers

from browser_drive import kernel_eval, open_notebook, run_all, wait_idle  # noqa: E402
from browser_lab import LabServer, launch_chromium, stage  # noqa: E402

THEMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}
SET_THEME = "async (name) => { await window.jupyterapp.commands.execute('apputils:change-theme', {theme: name}); }"
SCROLLER = "document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer')"
VIEW = dict(width=1280, height=1000)
COLUMNS = 4


def pages(page, folder: Path, theme: str) -> list[Path]:
    """Screens of the open notebook from top to bottom, saved as ``<theme>_NN.png``."""
    height = page.evaluate(f"() => {SCROLLER}.scrollHeight")
    step = page.evaluate(f"() => {SCROLLER}.clientHeight") - 60  # a little overlap between screens
    out = []
    for i, y in enumerate(range(0, max(height, 1), max(step, 200))):
        page.evaluate(f"(y) => {{ {SCROLLER}.scrollTop = y; }}", y)
        time.sleep(0.5)  # plotly redraws what scrolled into view
        path = folder / f"{theme}_{i:02d}.png"
        page.screenshot(path=str(path))
        out.append(path)
    return out


def sheet(page, shots: list[Path], title: str, out: Path) -> None:
    """A grid of thumbnails of ``shots`` (COLUMNS per row) photographed as one JPEG."""
    imgs = "".join(f'<img src="data:image/png;base64,{base64.b64encode(p.read_bytes()).decode()}">' for p in shots)
    page.set_content(f"""<html><body style="margin:8px;background:#888;font:16px sans-serif">
      <div style="color:white;margin-bottom:6px">{title}</div>
      <div style="display:grid;grid-template-columns:repeat({COLUMNS},1fr);gap:6px">{imgs}</div>
      <style>img{{width:100%;border:1px solid #444}}</style></body></html>""")
    page.wait_for_timeout(300)
    page.screenshot(path=str(out), full_page=True, type="jpeg", quality=70)
    page.close()


def main(args: list[str]) -> int:
    from playwright.sync_api import sync_playwright

    unknown = [a for a in args if a.startswith("-") and a not in ("--saved", "--smoke")]
    if unknown:  # --help included: print the usage, never start a run of every notebook
        print(__doc__, file=sys.stderr if set(unknown) - {"-h", "--help"} else sys.stdout)
        return 0 if set(unknown) <= {"-h", "--help"} else 2
    mode = next((a for a in args if a in ("--saved", "--smoke")), "--full")
    names = [a for a in args if not a.startswith("--")]
    src = ROOT / "test-artifacts" / "executed" if mode == "--saved" else ROOT / "notebooks"
    books = sorted(src.glob("*.ipynb"))
    if names:
        books = [b for b in books if b.stem in names or b.stem[:2] in names]
    if not books:
        print(f"no executed notebooks in {src}: run scripts/measure_runtimes.py --save {src} first", file=sys.stderr)
        return 2
    out_dir, full_dir = ROOT / "docs" / "images" / "contact", ROOT / "test-artifacts" / "contact"
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        stage(work / "root", {"notebooks": books})
        server = LabServer(work / "root", work, env={"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT),
                                                    "RLNB_SMOKE": "1" if mode == "--smoke" else "0",
                                                    "OMP_WAIT_POLICY": "PASSIVE", "TOKENIZERS_PARALLELISM": "false"})
        # JupyterLab renders saved widget state only with the widget manager's saveState setting on
        widgets = work / "settings" / "@jupyter-widgets" / "jupyterlab-manager" / "plugin.jupyterlab-settings"
        widgets.parent.mkdir(parents=True, exist_ok=True)
        widgets.write_text('{"saveState": true}')
        pw = sync_playwright().start()
        browser = launch_chromium(pw)
        try:
            for book in books:
                page = browser.new_context(viewport=VIEW).new_page()
                folder = full_dir / book.stem
                folder.mkdir(parents=True, exist_ok=True)
                open_notebook(page, server.url(f"lab/tree/notebooks/{book.name}"))
                page.evaluate("() => window.jupyterapp.shell.collapseLeft()")  # the page, not the file list
                # the light theme before the kernel draws anything: rlnb's figures start in the theme JupyterLab
                # saved, and the previous notebook's dark pass saved the dark one
                page.evaluate(SET_THEME, THEMES["light"])
                page.wait_for_timeout(1000)
                if mode != "--saved":
                    t0 = time.monotonic()
                    ran = run_all(page, timeout_s=1800)
                    wait_idle(page, timeout_s=600)
                    print(f"{book.stem}: ran in {time.monotonic() - t0:.0f} s ({mode[2:]} mode), ok={ran.get('ok')}",
                          flush=True)
                for theme, lab_theme in THEMES.items():
                    page.evaluate(SET_THEME, lab_theme)
                    if mode != "--saved":
                        kernel_eval(page, f"import rlnb; rlnb.viz.set_theme({theme!r})")
                    page.wait_for_timeout(4000)  # figures and widgets redraw in the theme
                    shots = pages(page, folder, theme)
                    label = "saved full-mode outputs" if mode == "--saved" else f"run live in {mode[2:]} mode"
                    sheet(page.context.new_page(), shots, f"{book.stem} ({theme}; {label})",
                          out_dir / f"{book.stem}_{theme}.jpg")
                    print(f"{book.stem} {theme}: {len(shots)} screens -> {out_dir / f'{book.stem}_{theme}.jpg'}",
                          flush=True)
                page.context.close()
        finally:
            browser.close()
            pw.stop()
            server.stop()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main(sys.argv[1:]))
