"""A fresh venv installed from the wheelhouse alone starts the course with the one documented command.

Opt-in (RLNB_WHEELHOUSE_TEST=1): it builds the wheelhouse as `make wheelhouse` does (or uses RLNB_WHEELHOUSE, an
existing folder), then a fresh venv of about 2.7 GB installed with the README's line and every index refused
(`--no-index`, no pip configuration), and in a copy of the course folder (not a git checkout, as from a USB stick):
`rlnb course --print`, `rlnb reset 00` and `rlnb doctor --no-timing`, with that venv's own `rlnb`."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAKEFILE = (ROOT / "Makefile").read_text()
TORCH_SPEC = re.search(r"^TORCH_SPEC\s*\?=\s*(\S+)", MAKEFILE, re.M).group(1)
EXTRAS = re.search(r"^COURSE_EXTRAS\s*\?=\s*(\S+)", MAKEFILE, re.M).group(1)
pytestmark = pytest.mark.skipif(os.environ.get("RLNB_WHEELHOUSE_TEST") != "1",
                                reason="builds a 2.7 GB venv: RLNB_WHEELHOUSE_TEST=1 (RLNB_WHEELHOUSE=folder to reuse one)")


def sh(*cmd, **kw) -> subprocess.CompletedProcess:
    out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=3600, **kw)
    assert out.returncode == 0, f"{cmd}: exit {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory) -> Path:
    if os.environ.get("RLNB_WHEELHOUSE"):
        return Path(os.environ["RLNB_WHEELHOUSE"]).resolve()
    sys.path.insert(0, str(ROOT / "tests"))  # pytest imports test files by path, not as a package
    from test_wheelhouse import build_rlnb_wheel  # from a copy of the sources: no build/ left in the checkout

    wh = tmp_path_factory.mktemp("wheelhouse")  # the Makefile's `wheelhouse` target, with this machine's pip
    build_rlnb_wheel(wh, tmp_path_factory.mktemp("src"))
    sh(sys.executable, "-m", "pip", "download", "-q", "-d", wh, TORCH_SPEC)
    sh(sys.executable, "-m", "pip", "wheel", "-q", "-w", wh, "--find-links", wh, TORCH_SPEC, f"rlnb[{EXTRAS}]")
    return wh


@pytest.fixture(scope="module")
def learner(wheelhouse, tmp_path_factory) -> dict:
    """A fresh venv from the wheelhouse alone, and a copy of the course folder."""
    tmp = tmp_path_factory.mktemp("learner")
    venv, course = tmp / "venv", tmp / "course"
    sh(sys.executable, "-m", "venv", venv)
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    offline = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
    offline.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1")  # no mirror, no find-links but the wheelhouse
    sh(bin_dir / "python", "-m", "pip", "install", "-q", "--no-index", "--find-links", wheelhouse,
       f"rlnb[{EXTRAS}]", env=offline)
    for part in ("notebooks", "docs/results"):
        shutil.copytree(ROOT / part, course / part, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    env = {k: v for k, v in offline.items() if k not in ("OMP_WAIT_POLICY", "RLNB_SMOKE")}
    return {"rlnb": bin_dir / "rlnb", "python": bin_dir / "python", "course": course, "env": env}


def test_the_installed_rlnb_is_the_wheel_not_this_checkout(learner):
    out = sh(learner["python"], "-c", "import rlnb; print(rlnb.__file__)", cwd=learner["course"], env=learner["env"])
    assert str(ROOT) not in out.stdout and "site-packages" in out.stdout


def test_rlnb_course_starts_the_venvs_own_jupyterlab_in_the_course_folder(learner):
    out = sh(learner["rlnb"], "course", "--print", cwd=learner["course"] / "notebooks", env=learner["env"])
    first, command = out.stdout.splitlines()
    assert first.startswith(f"rlnb course: {learner['course'].resolve()}, full mode")
    assert command.startswith("OMP_WAIT_POLICY=PASSIVE TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 ")
    assert f"{learner['python']} -m jupyterlab" in command and "notebooks/00_start_here.ipynb" in command
    sh(learner["python"], "-c", "import jupyterlab, ipywidgets, anywidget, plotly, trl, peft", env=learner["env"])
    slow = sh(learner["rlnb"], "course", "--slow", "--print", cwd=learner["course"], env=learner["env"])
    assert "RLNB_SMOKE=1" in slow.stdout.splitlines()[1]


def test_rlnb_reset_gives_chapter_00_back_and_keeps_the_learners_copy(learner):
    course = learner["course"]
    sh(learner["rlnb"], "course", "--print", cwd=course, env=learner["env"])  # keeps the shipped copies
    nb = course / "notebooks" / "00_start_here.ipynb"
    shipped = nb.read_text()
    edited = json.loads(shipped)
    edited["cells"] = edited["cells"][:1]
    nb.write_text(json.dumps(edited))
    out = sh(learner["rlnb"], "reset", "00", cwd=course, env=learner["env"])
    assert nb.read_text() == shipped and "as shipped again" in out.stdout
    (kept,) = (course / "my_copies").glob("00_start_here-*.ipynb")
    assert json.loads(kept.read_text())["cells"] == edited["cells"]


def test_the_doctor_finds_the_laptop_ready(learner):
    out = subprocess.run([learner["rlnb"], "doctor", "--no-timing"], cwd=learner["course"], env=learner["env"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "chapter 00_start_here: about" in out.stdout and out.stdout.splitlines()[-1] == "ready for the workshop"
