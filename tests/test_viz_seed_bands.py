"""Seed bands and seed bars: the mean, the min..max band and the error bars are the data's."""

import pytest

from rlnb.viz import seed_bands, seed_bars
from rlnb.viz.figures.seeds import band_stats


def test_band_stats_by_hand():
    mean, lo, hi = band_stats([[1.0, 4.0, 0.0], [3.0, 2.0, 0.0], [2.0, 3.0, 3.0]])
    assert mean == [2.0, 3.0, 1.0] and lo == [1.0, 2.0, 0.0] and hi == [3.0, 4.0, 3.0]


def test_seed_bands_draws_a_band_and_a_mean_per_arm():
    fig = seed_bands({"a": [[0.0, 1.0], [2.0, 3.0]], "b": [[5.0, 5.0]]}, title="t", yaxis="y (units)", label="live")
    band, mean_a, mean_b = fig.data                                   # one seed: no band for "b"
    assert list(band.y) == [2.0, 3.0, 1.0, 0.0]                        # max forwards, min backwards
    assert list(mean_a.y) == [1.0, 2.0] and list(mean_a.x) == [1, 2]
    assert "2 seeds" in mean_a.name and "live" in mean_a.name and "1 seed" in mean_b.name
    assert fig.layout.yaxis.title.text == "y (units)"
    assert seed_bands({"a": [[1.0]]}, title="t", yaxis="y", colors={"a": "#123456"}).data[0].line.color == "#123456"


def test_seed_bars_error_bars_span_the_seeds():
    fig = seed_bars({"grpo": {"x1": [1.0, 3.0], "x2": [4.0, 4.0, 7.0]}}, title="t", xaxis="group", yaxis="tokens")
    bar = fig.data[0]
    assert list(bar.y) == [2.0, 5.0]
    assert list(bar.error_y.array) == [1.0, 2.0] and list(bar.error_y.arrayminus) == [1.0, 1.0]
    assert seed_bars({"a": {"x": [2.0]}}, title="t", xaxis="x", yaxis="y").data[0].error_y.array is None


@pytest.mark.parametrize("bad", [{}, {"a": []}, {"a": [[1.0], [1.0, 2.0]]}])
def test_seed_bands_rejects_bad_runs(bad):
    with pytest.raises(ValueError, match="runs"):
        seed_bands(bad, title="t", xaxis="x", yaxis="y")


def test_seed_bars_rejects_an_empty_group():
    with pytest.raises(ValueError, match="groups"):
        seed_bars({"a": {"x": []}}, title="t", xaxis="x", yaxis="y")


def test_block_explorer_matches_fp64_at_every_block_width_and_reacts_to_its_sliders():
    import torch

    from rlnb.viz import BlockExplorer
    from rlnb.viz.explorers.block import online_lse_trace

    z = torch.tensor([1000.0, 999.0, -float("inf"), 3.0, 998.5], dtype=torch.float64)   # huge logits, a masked one
    for block in (1, 2, 3, 5, 8):
        out = online_lse_trace(z, block)
        assert abs(out["lse"] - float(torch.logsumexp(z, 0))) < 1e-12
        p = torch.softmax(z, 0)
        assert abs(out["H"] - float(-(p[p > 0] * p[p > 0].log()).sum())) < 1e-12
    ex = BlockExplorer(block=64)
    assert ex.values["blocks"] == 79 and ex.values["|lse - fp64|"] < 1e-9      # ceil(5000 / 64)
    ex.controls["block"].value = 4096
    ex.controls["V"].value = 100
    assert ex.values["blocks"] == 1 and ex.n_updates == 2 and ex.values["|H - fp64|"] < 1e-9
    with pytest.raises(ValueError, match="block"):
        online_lse_trace(z, 0)
