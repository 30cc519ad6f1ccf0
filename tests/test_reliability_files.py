"""Run folders under real use: one process per folder, a full disk, symlinked folders."""

import json
import os
import subprocess
import sys
import time

import pytest

from rlnb import Trainer
from rlnb.cli.lock import run_lock

RLNB = [sys.executable, "-m", "rlnb"]
ENV = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
SMALL = ["--prompts-per-step", "2", "--num-generations", "4", "--max-new-tokens", "8", "--eval-n", "0", "--no-progress"]


def test_a_held_run_folder_is_refused_by_flag_and_pid(tmp_path):
    with run_lock(tmp_path / "run"):
        with pytest.raises(ValueError, match=rf"^--resume: .*run is in use by another rlnb train \(pid {os.getpid()}\)"):
            with run_lock(tmp_path / "run", "--resume"):
                pass
    with run_lock(tmp_path / "run"):                                       # released at the end of the block
        pass


@pytest.mark.slow
def test_a_second_process_on_one_run_folder_is_refused_and_the_first_writes_on(tmp_path):
    out = tmp_path / "run"
    first = subprocess.Popen([*RLNB, "train", "--steps", "100000", "--out", str(out), "--save-every", "1", *SMALL],
                             cwd=tmp_path, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.monotonic()
        while not (out / "checkpoint").exists() and time.monotonic() - t0 < 240:  # the first checkpoint is written
            time.sleep(0.2)
        assert (out / "checkpoint").exists(), first.stderr.read() if first.poll() is not None else "no checkpoint"
        for argv in (["--resume", str(out)], ["--out", str(out), "--overwrite"]):
            second = subprocess.run([*RLNB, "train", *argv, "--steps", "100001", "--no-progress"], cwd=tmp_path, env=ENV,
                                    capture_output=True, text=True, timeout=300)
            assert second.returncode == 2, second.stderr[-800:]
            assert second.stderr.strip().startswith(f"rlnb: error: {argv[0]}: ") and f"pid {first.pid}" in second.stderr
            assert len(second.stderr.strip().splitlines()) == 1
        assert first.poll() is None                                        # the first run goes on
    finally:
        first.terminate()
        first.wait(60)
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, len(steps) + 1))                         # one writer: no step twice


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE stands in for a full disk on Linux")
def test_a_full_disk_during_a_checkpoint_is_one_line_exit_2_and_the_last_checkpoint_loads(tmp_path):
    import resource
    import signal

    out = tmp_path / "run"
    ok = subprocess.run([*RLNB, "train", "--steps", "2", "--out", str(out), *SMALL],
                        cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr[-800:]

    def full_disk():  # files may not grow past 1 MB (the model file is 4 MB): writes fail with EFBIG
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1_000_000, 1_000_000))

    bad = subprocess.run([*RLNB, "train", "--resume", str(out), "--steps", "4", "--no-progress"], cwd=tmp_path,
                         env=ENV, capture_output=True, text=True, timeout=300, preexec_fn=full_disk)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr[-1500:]
    line = bad.stderr.strip().splitlines()[-1]
    assert line.startswith("rlnb: error: directory: could not write the checkpoint") and "intact" in line
    assert not (out / "checkpoint.tmp").exists()
    assert Trainer.load(out / "checkpoint").step_count == 2                # the previous checkpoint is whole
    again = subprocess.run([*RLNB, "train", "--resume", str(out), "--steps", "3", "--no-progress", "--eval-n", "0"],
                           cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-800:]
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]                                              # metrics follow the checkpoint


def test_saving_twice_through_a_symlinked_checkpoint_folder_keeps_the_link(tmp_path):
    t = Trainer.tiny("grpo", prompts_per_step=2, num_generations=4, max_new_tokens=8)
    real, link = tmp_path / "disk" / "ckpt", tmp_path / "ckpt"
    real.mkdir(parents=True)
    link.symlink_to(real, target_is_directory=True)
    t.step()
    t.save(link)
    t.step()
    t.save(link)
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt", "disk"]
    assert sorted(p.name for p in real.parent.iterdir()) == ["ckpt"]      # no .tmp or .old left
    assert Trainer.load(link).step_count == 2
