"""The multi-process launch of the TRL export (chapter 15): two CPU processes (torchrun, gloo) run TRL's
GRPOTrainer on the embedded default model for two steps, and each rank reports what it did."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("trl", reason="the TRL bridge needs trl (pip install 'rlnb[trl]')")

ROOT = Path(__file__).resolve().parents[1]


def launch_command(out: Path, port: int = 29531) -> list[str]:
    """The command chapter 15 shows, with a rank report per process."""
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or "torchrun"
    return [torchrun, "--nproc_per_node", "2", "--master_port", str(port), str(ROOT / "scripts" / "launch_trl.py"),
            "--recipe", "grpo", "--task", "add", "--steps", "2", "--prompts-per-step", "2", "--num-generations", "4",
            "--lr", "1e-3", "--warmup-steps", "0", "--no-gradient-checkpointing", "--quiet",
            "--output-dir", str(out / "run"), "--rank-report", str(out / "ranks")]


@pytest.mark.slow
def test_two_process_cpu_launch_trains_on_both_ranks(tmp_path):
    import rlnb
    from rlnb.export.rank_report import weight_checksum

    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    run = subprocess.run(launch_command(tmp_path), env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    reports = {int(p.stem[4:]): json.loads(p.read_text()) for p in (tmp_path / "ranks").glob("rank*.json")}
    assert sorted(reports) == [0, 1], f"expected a report from ranks 0 and 1, got {sorted(reports)}"
    start = weight_checksum(rlnb.load_default()[0])
    for rank, rep in reports.items():
        assert rep["world_size"] == 2, f"rank {rank} ran alone (world_size {rep['world_size']})"
        assert rep["global_step"] == 2 and len(rep["losses"]) == 2, f"rank {rank}: {rep}"
        assert abs(rep["checksum"] - start) > 1e-6, f"rank {rank}: the weights never moved from the default"
    # DDP averages the gradients, so the two replicas hold the same weights after every step
    assert reports[0]["checksum"] == pytest.approx(reports[1]["checksum"], rel=1e-9)


def test_rank_report_names_the_rank_and_counts_the_steps(tmp_path, monkeypatch):
    import torch

    from rlnb.export.rank_report import weight_checksum, write_rank_report

    model = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[1.5, -2.0]]))
    assert weight_checksum(model) == 3.5                                  # |1.5| + |-2.0|, by hand

    state = SimpleNamespace(global_step=3, log_history=[{"loss": 0.5}, {"eval": 1.0}, {"loss": 0.25}])
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    rep = json.loads(write_rank_report(SimpleNamespace(state=state, model=model), tmp_path).read_text())
    assert rep == {"rank": 1, "world_size": 2, "global_step": 3, "losses": [0.5, 0.25], "checksum": 3.5}
