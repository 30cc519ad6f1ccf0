"""``rlnb course`` opens the course in JupyterLab; ``rlnb reset NN`` gives a learner a chapter back as shipped.

One command for every laptop in the room (no ``make``, no shell syntax): it finds the course folder (the one that
holds ``notebooks/00_start_here.ipynb``: the given folder, else the current one or a folder above it), sets what
the chapters' runtimes were measured with (passive OpenMP threads, offline model hub) and ``--slow`` sets smoke mode
(every chapter in seconds), then starts the environment's own JupyterLab on chapter 00.

A pristine copy of each chapter is kept in ``<course>/.rlnb/pristine/`` the first time ``rlnb course`` sees it
without outputs (as shipped); ``rlnb reset`` restores from the course's git checkout when there is one, else from
that copy, and first moves the learner's notebook to ``<course>/my_copies/`` (nothing a learner wrote is lost).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

FIRST = Path("notebooks") / "00_start_here.ipynb"
PRISTINE = Path(".rlnb") / "pristine"
KEPT = Path("my_copies")
# what the chapters' runtimes (docs/results/runtimes.json) were measured with
ENV = {"OMP_WAIT_POLICY": "PASSIVE", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}


def add_parsers(sub) -> None:
    co = sub.add_parser("course", help="open the course in JupyterLab (from the course folder, offline settings)")
    co.add_argument("folder", nargs="?", default=None, help="the course folder (default: this folder or one above)")
    co.add_argument("--slow", action="store_true", help="a slow laptop: smoke mode, every chapter in seconds")
    co.add_argument("--print", dest="dry", action="store_true", help="print the command instead of starting it")
    co.set_defaults(fn=cmd_course)
    rs = sub.add_parser("reset", help="give back a chapter as shipped; your copy goes to my_copies/")
    rs.add_argument("chapter", help="the chapter's number or file name, e.g. 05 or 05_ratio_and_clipping")
    rs.add_argument("folder", nargs="?", default=None, help="the course folder (default: this folder or one above)")
    rs.set_defaults(fn=cmd_reset)


def find_course(folder: str | None) -> Path:
    """The course folder: ``folder`` itself, or the current folder or the nearest one above it."""
    if folder is not None:
        root = Path(folder).expanduser().resolve()
        if not (root / FIRST).is_file():
            raise ValueError(f"folder: {root} is not the course folder (it has no {FIRST.as_posix()})")
        return root
    here = Path.cwd().resolve()
    for root in (here, *here.parents):
        if (root / FIRST).is_file():
            return root
    raise ValueError(f"folder: no course folder here or above {here} (the folder that holds {FIRST.as_posix()}); "
                     "go to it first, or name it: rlnb course PATH")


def shipped(path: Path) -> bool:
    """Whether a notebook looks as shipped: no outputs and no execution counts (the course commits it so)."""
    try:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return all(not c.get("outputs") and c.get("execution_count") is None for c in cells if c.get("cell_type") == "code")


def keep_pristine(root: Path) -> list[str]:
    """Copy every chapter not yet kept that still looks as shipped into ``.rlnb/pristine``; the names copied."""
    (root / PRISTINE).mkdir(parents=True, exist_ok=True)
    copied = []
    for nb in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        target = root / PRISTINE / nb.name
        if not target.exists() and shipped(nb):
            shutil.copy2(nb, target)
            copied.append(nb.name)
    return copied


def course_command(root: Path) -> list[str]:
    """The environment's own JupyterLab (its widget extensions match the kernel's), rooted at the course."""
    cmd = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={root}", FIRST.as_posix()]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # a container's only user: JupyterLab refuses root otherwise
        cmd.insert(3, "--allow-root")
    return cmd


def cmd_course(args) -> int:
    root = find_course(args.folder)
    keep_pristine(root)
    env = {**os.environ, **ENV, **({"RLNB_SMOKE": "1"} if args.slow else {})}
    cmd = course_command(root)
    smoke = env.get("RLNB_SMOKE") == "1"  # --slow, or set by the learner before
    mode = "smoke mode: every chapter in seconds" if smoke else "full mode (a slow laptop: rlnb course --slow)"
    print(f"rlnb course: {root}, {mode}; stop JupyterLab with Ctrl-C here", flush=True)
    if args.dry:
        print(*(f"{k}={env[k]}" for k in (*ENV, "RLNB_SMOKE") if k in env), *cmd)
        return 0
    if os.name == "posix":  # JupyterLab takes this process's place: Ctrl-C and a stop signal reach it directly
        os.chdir(root)
        os.execve(cmd[0], cmd, env)
    try:
        return subprocess.call(cmd, cwd=root, env=env)
    except KeyboardInterrupt:  # Windows: JupyterLab stops on the same Ctrl-C
        return 0


def find_chapter(root: Path, chapter: str) -> Path:
    """The notebook named by ``chapter`` (``"5"``, ``"05"``, ``"05_ratio_and_clipping"`` or its file name)."""
    key = chapter.strip().removesuffix(".ipynb")
    if key.isdigit():
        key = f"{int(key):02d}_"
    found = sorted(p for p in (root / "notebooks").glob("[0-9][0-9]_*.ipynb")
                   if p.stem == key or (key.endswith("_") and p.name.startswith(key)))
    if len(found) != 1:
        names = ", ".join(p.stem for p in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")))
        raise ValueError(f"chapter: expected a chapter's number or name, got {chapter!r}; the chapters: {names}")
    return found[0]


def pristine_text(root: Path, nb: Path) -> tuple[str, str]:
    """(the chapter as shipped, where it came from): the course's git checkout, else the kept copy."""
    rel = nb.relative_to(root).as_posix()
    if shutil.which("git") and (root / ".git").exists():
        out = subprocess.run(["git", "-C", str(root), "show", f"HEAD:{rel}"], capture_output=True, text=True)
        if out.returncode == 0:
            return out.stdout, "the course's git checkout (HEAD)"
    kept = root / PRISTINE / nb.name
    if kept.is_file():
        return kept.read_text(encoding="utf-8"), f"the copy kept when the course was first opened ({kept})"
    raise ValueError(f"chapter: no shipped copy of {nb.name}: the course folder is not a git checkout and "
                     f"{PRISTINE.as_posix()}/ has none (rlnb course keeps one the first time it opens the folder); "
                     "copy the notebook again from the USB stick or the repository")


def cmd_reset(args) -> int:
    root = find_course(args.folder)
    nb = find_chapter(root, args.chapter)
    text, source = pristine_text(root, nb)  # found before anything moves
    json.loads(text)  # a shipped copy that is not a notebook stops here, nothing moved
    kept = None
    if nb.read_text(encoding="utf-8") != text:
        kept = root / KEPT / f"{nb.stem}-{time.strftime('%Y%m%d-%H%M%S')}.ipynb"
        kept.parent.mkdir(exist_ok=True)
        shutil.copy2(nb, kept)
    nb.write_text(text, encoding="utf-8")
    print(f"rlnb reset: {nb.relative_to(root)} is as shipped again, from {source}")
    print(f"your copy: {kept.relative_to(root)}" if kept else "it was unchanged: nothing kept aside")
    print("in JupyterLab: File > Reload Notebook from Disk, then Kernel > Restart Kernel and Run All Cells")
    return 0
