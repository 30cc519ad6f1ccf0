"""``python -m rlnb.bench rows``: its arguments, its table, and one real step of each mode (not timed: the numbers
are whatever this machine gives; the test checks that each mode ran the path it names)."""

import pytest

from rlnb.bench import rows
from rlnb.models import row_split


def test_bad_arguments_are_named(capsys):
    with pytest.raises(SystemExit) as e:
        rows.parse(["--threads", "0"])
    assert e.value.code == 2 and "--threads: expected a positive int" in capsys.readouterr().err


def test_table_prints_medians_ratios_and_the_loss_gap():
    cell = lambda s, loss: {"step": s, "sample": s / 2, "update": s / 2, "loss": loss}  # noqa: E731
    lines = rows.table({"whole": [cell(0.6, 0.25), cell(0.8, 0.1)], "split": [cell(0.35, 0.5), cell(0.35, 0.1)]})
    assert lines[1] == "whole | 0.700  | 0.350  | 0.350"
    assert lines[2] == "split | 0.350  | 0.175  | 0.175"
    assert lines[3] == "whole / split: step 2.00x, sample 2.00x, update 2.00x"
    assert lines[4].endswith("2.50e-01")


def test_each_mode_runs_its_path(monkeypatch):
    import torch

    before = torch.get_num_threads()
    split_backwards = []
    real = row_split.backward
    monkeypatch.setattr(row_split, "backward", lambda *a: split_backwards.append(1) or real(*a))
    try:
        res = rows.measure(1, 2)
    finally:
        torch.set_num_threads(before)
    assert [len(v) for v in res.values()] == [1, 1] and split_backwards == [1, 1]   # warm-up + one step: split only
    assert all(r["step"] > 0 and r["sample"] > 0 for v in res.values() for r in v)
