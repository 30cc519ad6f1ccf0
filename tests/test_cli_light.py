"""The `rlnb` command prints before torch loads (issue 41: a busy laptop's doctor printed nothing for minutes).

A spy on the import system, in the real command's process, prints a marker the moment torch starts importing; the
tests assert where that marker falls among the printed lines (an order, not a time: no timed assertion)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = "<torch import starts: OMP_WAIT_POLICY={}>"
# the console script `rlnb` is `from rlnb.cli import main; sys.exit(main())`: the same entry, with a spy before it
SPY = f"""
import importlib.abc, os, sys
class Spy(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "torch":
            print({MARK!r}.format(os.environ.get("OMP_WAIT_POLICY")), flush=True)
            sys.meta_path.remove(self)
sys.meta_path.insert(0, Spy())
from rlnb.cli import main
sys.exit(main(sys.argv[1:]))
"""


def run(*argv: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-c", SPY, *argv], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode in (0, 1), out.stderr[-2000:]
    return out.stdout.splitlines()


def test_importing_the_command_line_does_not_import_torch():
    code = "import sys, rlnb.cli; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "False"


def test_doctor_prints_python_cpu_and_loading_torch_before_torch_imports_with_passive_waits():
    lines = run("doctor", "--no-timing")
    marks = [i for i, ln in enumerate(lines) if ln.startswith("<torch import starts")]
    assert len(marks) == 1, lines
    before = lines[:marks[0]]
    assert [ln.split(":")[0].split()[-1] for ln in before[:2]] == ["python", "cpu"], lines
    assert before[-1] == "loading torch ...", lines
    assert lines[marks[0]] == MARK.format("PASSIVE")  # set by `import rlnb`, before torch reads it
    assert any(ln.split()[1] == "torch:" for ln in lines[marks[0] + 1:] if len(ln.split()) > 1)


def test_course_and_reset_never_import_torch(tmp_path):
    (tmp_path / "notebooks").mkdir()
    nb = tmp_path / "notebooks" / "00_start_here.ipynb"
    nb.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    lines = run("course", "--print", str(tmp_path))
    assert not any(ln.startswith("<torch") for ln in lines) and "jupyterlab" in lines[-1], lines
    lines = run("reset", "00", str(tmp_path))  # kept by `course` above: no git checkout here
    assert not any(ln.startswith("<torch") for ln in lines) and lines[0].startswith("rlnb reset:"), lines


def test_the_heavy_commands_still_get_their_recipe_flags():
    from rlnb.cli import build_parser

    args = build_parser().parse_args(["train", "--lr", "0.001", "--steps", "3"])
    assert args.r_lr == 0.001 and args.steps == 3
    light = build_parser(recipe_flags=False)
    assert light.parse_args(["doctor", "--no-timing"]).no_timing


def test_import_rlnb_still_reaches_every_name_and_subpackage_it_did():
    code = ("import rlnb; names = [getattr(rlnb, n) for n in rlnb.__all__]; "
            "print(rlnb.check.__name__, rlnb.run.controllers.__name__, rlnb.Trainer.__name__, len(names)); "
            "import importlib; rlnb.no_such_thing")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.split() == ["rlnb.check", "rlnb.run.controllers", "Trainer", "16"], out.stderr[-2000:]
    assert "AttributeError: module 'rlnb' has no attribute 'no_such_thing'" in out.stderr
