"""``rlnb train`` killed with SIGKILL mid-run, then ``--resume``d: the final metrics equal an uninterrupted
run's, and metrics.jsonl never keeps steps the checkpoint does not know about."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from rlnb.cli import main

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["--steps", "8", "--prompts-per-step", "4", "--num-generations", "4", "--max-new-tokens", "12",
        "--eval-n", "0", "--save-every", "1", "--no-progress"]


def train_in_subprocess(*args):
    """``python -m rlnb train`` with this process's thread count, so its numbers match in-process runs."""
    n = str(torch.get_num_threads())  # both libraries' counts: under xdist the root conftest sets MKL's to 1 too
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS=n, MKL_NUM_THREADS=n, HF_HUB_OFFLINE="1")
    cmd = [sys.executable, "-m", "rlnb", "train", *args]
    return subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def metrics(out: Path) -> list[dict]:
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(x).items() if not k.startswith("timing/")} for x in lines]


def lines_in(path: Path) -> int:
    try:
        return path.read_text().count("\n")
    except FileNotFoundError:
        return 0




def test_killed_run_resumes_to_the_same_metrics(tmp_path, two_threads):
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    assert main(["train", "--out", str(whole), *ARGS]) == 0

    proc = train_in_subprocess("--out", str(killed), *ARGS)
    deadline = time.time() + 240
    while lines_in(killed / "metrics.jsonl") < 3 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    if proc.returncode != -signal.SIGKILL:
        pytest.skip(f"the run ended (rc {proc.returncode}) before it could be killed; nothing to resume")
    assert 3 <= lines_in(killed / "metrics.jsonl") < 8

    assert main(["train", "--resume", str(killed), "--no-progress", "--eval-n", "0"]) == 0
    got, expected = metrics(killed), metrics(whole)
    assert [m["step"] for m in got] == list(range(1, 9))
    diffs = [(m["step"], k, m.get(k), e.get(k)) for m, e in zip(got, expected) for k in sorted(set(m) | set(e))
             if m.get(k) != e.get(k)]
    assert diffs == [], f"(step, metric, resumed, uninterrupted), first of {len(diffs)}: {diffs[:6]}"
    assert not (killed / "checkpoint.tmp").exists() and not (killed / "checkpoint.old").exists()


def test_resume_drops_metrics_the_checkpoint_does_not_know(tmp_path, capsys):
    """A kill between writing a step's metrics and its checkpoint (or halfway through a line)."""
    out = tmp_path / "run"
    small = ["--prompts-per-step", "2", "--num-generations", "2", "--max-new-tokens", "8", "--eval-n", "0",
             "--no-progress", "--save-every", "1"]
    assert main(["train", "--out", str(out), "--steps", "2", *small]) == 0
    two = metrics(out)
    with open(out / "metrics.jsonl", "a") as f:
        f.write(json.dumps({**two[-1], "step": 3}) + "\n" + '{"step": 4, "rew')  # unknown step, torn line
    assert main(["train", "--resume", str(out), "--steps", "3", "--no-progress", "--eval-n", "0"]) == 0
    got = metrics(out)
    assert [m["step"] for m in got] == [1, 2, 3] and got[:2] == two
    assert got[2] != {**two[-1], "step": 3}                         # step 3 was trained, not the stale line
    assert json.loads((out / "summary.json").read_text())["steps"] == 3


def test_resume_refuses_recipe_changes(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--out", str(out), "--steps", "1", "--prompts-per-step", "2", "--num-generations", "2",
                 "--max-new-tokens", "8", "--eval-n", "0", "--no-progress"]) == 0
    assert main(["train", "--resume", str(out), "--lr", "0.1", "--no-progress"]) == 2
    assert "--resume" in capsys.readouterr().err
    assert main(["train", "--resume", str(tmp_path / "nothing"), "--no-progress"]) == 2
    assert "--resume: no such folder" in capsys.readouterr().err
