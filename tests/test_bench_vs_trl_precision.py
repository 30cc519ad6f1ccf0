"""``bench_vs_trl.py --precision``: one flag, the same precision on both sides, printed in the settings line.
Not timed (the numbers a run prints are not checked; that it ran each side in the precision asked is)."""

import argparse

import pytest
import torch

from rlnb.bench import vs_trl
from rlnb.models.precision import autocast_dtype


def test_each_precision_builds_rlnb_and_trl_alike():
    for precision, dtype, trl_bf16 in (("fp32", None, False), ("bf16", torch.bfloat16, True)):
        ours = vs_trl.rlnb_trainer(precision, seed=0)
        assert autocast_dtype(ours.model) == dtype
        assert all(p.dtype == torch.float32 for p in ours.model.parameters())  # master weights fp32 either way
        args = argparse.Namespace(steps=1, warmup=0, seed=0, precision=precision)
        trl = vs_trl.build_trl(ours, args, on_step=lambda s: None)
        assert trl.args.bf16 is trl_bf16 and next(trl.model.parameters()).dtype == torch.float32


def test_a_bf16_run_prints_its_precision_and_trl_ran_under_autocast(capsys, monkeypatch):
    from rlnb.stages import sample as sample_mod

    monkeypatch.setattr(sample_mod, "sample", sample_mod.sample)  # main wraps it with a timer: put it back after
    before = torch.get_num_threads()
    vs_trl.main(["--steps", "1", "--warmup", "0", "--eval", "0", "--precision", "bf16", "--threads", str(before + 1)])
    assert torch.get_num_threads() == before                  # the benchmark's --threads never outlives it
    out = capsys.readouterr().out
    assert "precision bf16 (both sides)" in out and "bf16 matmul (" in out
    assert "TRL forwards under autocast: generation True, training True; under fp32: generation False, " \
           "training False" in out


def test_an_unknown_precision_is_refused_naming_the_flag(capsys):
    with pytest.raises(SystemExit) as e:
        vs_trl.main(["--precision", "fp16"])
    assert e.value.code == 2 and "--precision" in capsys.readouterr().err


def test_the_matmul_rate_is_measured_in_the_runs_dtype():
    assert vs_trl.matmul_flops_per_s(64, 32, 16, reps=2, dtype=torch.bfloat16) > 0
    assert vs_trl.PRECISIONS == {"fp32": torch.float32, "bf16": torch.bfloat16}
