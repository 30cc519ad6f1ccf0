"""scripts/claim_studies.py re-runs: --fresh trains from scratch on a fresh checkout into --out, prints its own times
and its verdict beside the shipped one; --resume keeps saved runs only when asked; without a flag nothing runs."""

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _cli(checkout: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(checkout), "RLNB_RESULTS": str(checkout / "docs" / "results"),
           "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run([sys.executable, "scripts/claim_studies.py", *args], cwd=checkout, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """The committed tree (git archive HEAD): what a fresh clone holds, nothing trained or saved before."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    where = tmp_path_factory.mktemp("clone")
    archive = where / "head.tar"
    subprocess.run(["git", "archive", "--format=tar", "-o", str(archive), "HEAD"], cwd=ROOT, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(where / "repo", filter="data")
    return where / "repo"


def test_fresh_trains_from_scratch_and_prints_both_verdicts(checkout, tmp_path):
    out = tmp_path / "out"
    run = _cli(checkout, "hacking_third", "--fresh", "--out", str(out), "--smoke")
    assert run.returncode == 0, run.stderr[-2000:]
    log = run.stdout
    assert log.count("trained ") == 2 and "kept from the saved file" not in log      # two arms x one seed, trained
    assert "done in " in log and "this run:" in log and "shipped:" in log
    assert (out / "hacking_third.json.gz").is_file()

    again = _cli(checkout, "hacking_third", "--fresh", "--out", str(out), "--smoke")  # a re-run never reuses silently
    assert again.returncode != 0 and "--resume" in again.stderr

    resumed = _cli(checkout, "hacking_third", "--resume", "--out", str(out), "--smoke")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert resumed.stdout.count("kept from the saved file") == 2 and "trained " not in resumed.stdout


def test_a_mode_must_be_named_and_fresh_needs_an_out(checkout):
    assert "one of the arguments --fresh --resume is required" in _cli(checkout, "hacking_third").stderr
    assert "--fresh: give --out" in _cli(checkout, "hacking_third", "--fresh").stderr
