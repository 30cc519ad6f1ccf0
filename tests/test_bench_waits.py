"""``python -m rlnb.bench waits``: its arguments, its table, and one real cell of each policy (not timed: the numbers
are whatever this machine gives; the test checks that each policy ran in its own process and printed a row)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from rlnb.bench import waits

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("argv", "message"), [(["--steps", "0"], "--steps: expected a positive int"),
                                               (["--burners", "a,1"], "--burners: expected comma-separated ints"),
                                               (["--burners", "-1"], "--burners: expected counts >= 0")])
def test_bad_arguments_are_named(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        waits.parse(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_row_prints_medians_and_the_ratio():
    cell = lambda s: {"step": s, "sample": s / 2, "update": s / 2}  # noqa: E731
    row = waits.line(1, {"passive": [cell(0.6), cell(0.8)], "spin": [cell(0.35), cell(0.35)]})
    assert row == "      1 | 0.700 (0.350 + 0.350) | 0.350 (0.175 + 0.175) | 2.00"


def test_child_gets_the_policy_in_its_own_environment(monkeypatch):
    seen = []

    def fake_run(cmd, capture_output, text, env, timeout):
        seen.append(env.get("GOMP_SPINCOUNT"))
        return subprocess.CompletedProcess(cmd, 0, '{"step": 1.0, "sample": 0.5, "update": 0.5}\n', "")
    monkeypatch.setenv("GOMP_SPINCOUNT", "777")                         # a caller's value never leaks into a cell
    monkeypatch.setattr(waits.subprocess, "run", fake_run)
    args = waits.parse(["--burners", "0", "--rounds", "2", "--spin", "123"])
    res = waits.measure(0, args)
    assert seen == [None, "123", None, "123"] and len(res["passive"]) == len(res["spin"]) == 2


def test_one_real_cell_of_each_policy():
    out = subprocess.run([sys.executable, "-m", "rlnb.bench", "waits", "--burners", "0", "--steps", "1",
                          "--rounds", "1", "--threads", "1"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    row = out.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"\s+0 \| [0-9.]+ \([0-9.]+ \+ [0-9.]+\) \| [0-9.]+ \([0-9.]+ \+ [0-9.]+\) \| [0-9.]+", row), row
