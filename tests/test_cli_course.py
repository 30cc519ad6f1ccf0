"""``rlnb course`` (the one way in for learners) and ``rlnb reset NN`` (a chapter back as shipped)."""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from rlnb.cli import main
from rlnb.cli.course import PRISTINE

REPO = Path(__file__).resolve().parents[1]
CHAPTERS = ["00_start_here.ipynb", "05_ratio_and_clipping.ipynb"]


@pytest.fixture
def course(tmp_path):
    """A course folder with two chapters as shipped (no outputs)."""
    (tmp_path / "notebooks").mkdir()
    for name in CHAPTERS:
        shutil.copy(REPO / "notebooks" / name, tmp_path / "notebooks" / name)
    return tmp_path


def with_output(path: Path) -> str:
    """Give the notebook's first code cell an output, as a learner's run does; the new text."""
    nb = json.loads(path.read_text())
    cell = next(c for c in nb["cells"] if c["cell_type"] == "code")
    cell["outputs"], cell["execution_count"] = [{"output_type": "stream", "name": "stdout", "text": "mine\n"}], 1
    path.write_text(json.dumps(nb))
    return path.read_text()


def test_course_finds_the_folder_from_inside_it_and_sets_the_offline_and_smoke_settings(course, capsys, monkeypatch):
    monkeypatch.chdir(course / "notebooks")
    monkeypatch.delenv("RLNB_SMOKE", raising=False)
    assert main(["course", "--print", "--slow"]) == 0
    out = capsys.readouterr().out
    assert "RLNB_SMOKE=1" in out and "OMP_WAIT_POLICY=PASSIVE" in out and "HF_HUB_OFFLINE=1" in out
    assert "-m jupyterlab" in out and f"--ServerApp.root_dir={course}" in out
    assert sorted(p.name for p in (course / PRISTINE).iterdir()) == CHAPTERS  # kept as shipped
    assert main(["course", "--print"]) == 0
    out = capsys.readouterr().out
    assert "RLNB_SMOKE" not in out and "full mode" in out


def test_course_keeps_no_pristine_copy_of_a_notebook_that_was_already_run(course, capsys):
    with_output(course / "notebooks" / CHAPTERS[1])
    assert main(["course", str(course), "--print"]) == 0
    assert [p.name for p in (course / PRISTINE).iterdir()] == [CHAPTERS[0]]


def test_course_outside_a_course_folder_says_where_to_go(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["course", "--print"]) == 2
    assert "no course folder" in capsys.readouterr().err
    assert main(["course", str(tmp_path), "--print"]) == 2
    assert "is not the course folder" in capsys.readouterr().err


def test_reset_restores_the_chapter_and_keeps_the_learners_copy(course, capsys):
    main(["course", str(course), "--print"])
    nb = course / "notebooks" / CHAPTERS[1]
    shipped, mine = nb.read_text(), with_output(nb)
    assert main(["reset", "5", str(course)]) == 0
    assert nb.read_text() == shipped
    [kept] = (course / "my_copies").iterdir()
    assert kept.read_text() == mine and kept.name.startswith("05_ratio_and_clipping-")
    assert main(["reset", "05_ratio_and_clipping", str(course)]) == 0  # unchanged: nothing kept twice
    assert len(list((course / "my_copies").iterdir())) == 1


def test_reset_refuses_an_unknown_chapter_or_one_with_no_shipped_copy_and_moves_nothing(course, capsys):
    nb = course / "notebooks" / CHAPTERS[1]
    mine = with_output(nb)
    assert main(["reset", "99", str(course)]) == 2
    assert "chapter: expected a chapter's number or name" in capsys.readouterr().err
    assert main(["reset", "05", str(course)]) == 2  # never opened with rlnb course, not a git checkout
    assert "no shipped copy" in capsys.readouterr().err
    assert nb.read_text() == mine and not (course / "my_copies").exists()


def test_reset_takes_the_chapter_from_the_courses_git_checkout(course, capsys):
    git = ["git", "-C", str(course), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "notebooks"], check=True)
    subprocess.run([*git, "commit", "-qm", "course"], check=True)
    nb = course / "notebooks" / CHAPTERS[0]
    shipped = nb.read_text()
    with_output(nb)
    assert main(["reset", "0", str(course)]) == 0
    assert nb.read_text() == shipped and "git checkout" in capsys.readouterr().out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_rlnb_course_starts_jupyterlab_serving_the_course(course, tmp_path_factory):
    """The one documented command, for real: JupyterLab answers on its port with the course's chapters."""
    port, token = free_port(), "rlnb-test"
    home = tmp_path_factory.mktemp("home")  # no user settings, no browser to open
    env = {**os.environ, "JUPYTER_PORT": str(port), "JUPYTER_TOKEN": token, "BROWSER": "true",
           "JUPYTER_RUNTIME_DIR": str(home / "runtime"), "JUPYTER_CONFIG_DIR": str(home / "config")}
    rlnb = [sys.executable, "-c", "import sys; from rlnb.cli import main; sys.exit(main())"]
    proc = subprocess.Popen([*rlnb, "course", str(course), "--slow"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        url = f"http://127.0.0.1:{port}/api/contents/notebooks?token={token}"
        deadline, listing = time.monotonic() + 300, None  # a wait, not a timing: a busy machine is slow
        while listing is None and time.monotonic() < deadline and proc.poll() is None:
            try:
                listing = json.load(urllib.request.urlopen(url, timeout=5))
            except OSError:
                time.sleep(0.5)
        assert listing is not None, f"JupyterLab did not answer (exit {proc.poll()})"
        assert sorted(item["name"] for item in listing["content"]) == CHAPTERS
    finally:
        proc.terminate()
        out = proc.communicate(timeout=30)[0]
    assert "rlnb course:" in out, out[-2000:]
