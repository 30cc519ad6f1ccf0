"""What a learner is told to type is what the `rlnb` command implements: every `rlnb ...` the README's offline
section and the teacher's guide show parses with the real parser, both end the offline path with `rlnb course`,
neither keeps a shell recipe (`jupyter lab`, `export`, `source`) for starting the course, and `make lab` installs the
course, not the developers' extras."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rlnb.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
CODE = re.compile(r"`([^`\n]+)`")
# how the course used to be started by hand: a shell recipe a Windows learner cannot type, which `rlnb course` replaces
STALE = re.compile(r"\bjupyter[ -]lab\b|^export |\bsource \S*activate|RLNB_SMOKE=1 jupyter", re.M)


def offline_section() -> str:
    return (ROOT / "README.md").read_text().split("## Offline workshop", 1)[1].split("\n## ", 1)[0]


def teaching() -> str:
    return (ROOT / "docs" / "teaching.md").read_text()


def rlnb_commands(text: str) -> list[str]:
    return [c for c in CODE.findall(text) if c.startswith("rlnb ")]


def unparsable(commands: list[str]) -> list[str]:
    out = []
    for c in commands:
        try:
            build_parser().parse_args(c.split()[1:])
        except SystemExit:
            out.append(c)
    return out


def test_the_checker_refuses_a_command_rlnb_does_not_have(capsys):
    assert unparsable(["rlnb course --slow", "rlnb reset 05", "rlnb doctor --no-timing"]) == []
    assert unparsable(["rlnb course --smoke", "rlnb open"]) == ["rlnb course --smoke", "rlnb open"]
    assert STALE.search("then `jupyter lab` in the folder") and not STALE.search("`rlnb course`")


@pytest.mark.parametrize("where", ["README offline section", "docs/teaching.md"])
def test_every_rlnb_command_shown_to_learners_parses_and_rlnb_course_starts_the_course(where, capsys):
    text = offline_section() if where.startswith("README") else teaching()
    commands = rlnb_commands(text)
    assert {"rlnb course", "rlnb course --slow", "rlnb doctor"} <= set(commands), commands
    assert any(c.startswith("rlnb reset ") for c in commands), commands
    assert unparsable(commands) == []
    assert not STALE.findall("\n".join(CODE.findall(text))), STALE.findall(text)


def test_the_offline_section_ends_with_the_command_that_starts_the_course():
    paragraphs = [p for p in offline_section().split("\n\n") if "`rlnb " in p]
    assert "`rlnb course`" in paragraphs[-1], paragraphs[-1][:200]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_lab_installs_the_course_extras_only():
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}  # under `make test`
    out = subprocess.run(["make", "--no-print-directory", "-n", "lab", "VENV=/nonexistent-venv"], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True).stdout
    extras = re.search(r"^COURSE_EXTRAS \?= (\S+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert f'-e ".[{extras}]"' in out, out
    for dev in ("dev", "browser", "site"):
        assert not re.search(rf"\[[^\]]*\b{dev}\b", out), out
    assert out.rstrip().splitlines()[-1] == "/nonexistent-venv/bin/rlnb course"
