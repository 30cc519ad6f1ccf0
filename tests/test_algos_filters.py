"""Filters, no-positive-resampling history, and DAPO overlong shaping."""

import pytest
import torch

from rlnb.algos import FILTERS, PassRateHistory, overlong_penalty


def test_registry_names():
    assert sorted(FILTERS) == ["dynamic_sampling", "overlong", "zero_variance"]


def test_zero_variance_drops_identical_groups():
    r = torch.tensor([1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.2, 0.2, 0.3, 0.5, 0.5, 0.5])
    keep = FILTERS["zero_variance"](r, 3)
    assert keep.tolist() == [False] * 6 + [True] * 3 + [False] * 3


def test_dynamic_sampling_counts_correct_not_rewards():
    correct = torch.tensor([1, 1, 0, 0, 0, 0, 1, 1, 1]).bool()
    rewards = torch.tensor([1.1, 1.1, 0.1, 0.1, 0.0, 0.1, 1.0, 1.0, 1.0])   # format bonus spreads group 2
    keep = FILTERS["dynamic_sampling"](rewards, 3, correct=correct)
    assert keep.tolist() == [True] * 3 + [False] * 6
    assert FILTERS["zero_variance"](rewards, 3).tolist() == [True] * 6 + [False] * 3


def test_overlong_is_row_level():
    trunc = torch.tensor([False, True, True, False])
    assert FILTERS["overlong"](torch.zeros(4), 2, truncated=trunc).tolist() == [True, False, False, True]


def test_filters_combine_with_and():
    r = torch.tensor([1.0, 0.0, 1.0, 1.0])
    trunc = torch.tensor([False, True, False, False])
    keep = FILTERS["zero_variance"](r, 2) & FILTERS["overlong"](r, 2, truncated=trunc)
    assert keep.tolist() == [True, False, False, False]


def test_missing_inputs_and_bad_shapes_raise():
    with pytest.raises(ValueError, match="correct"):
        FILTERS["dynamic_sampling"](torch.zeros(4), 2)
    with pytest.raises(ValueError, match="truncated"):
        FILTERS["overlong"](torch.zeros(4), 2)
    with pytest.raises(ValueError, match="rewards"):
        FILTERS["zero_variance"](torch.zeros(5), 2)
    with pytest.raises(ValueError, match="group_size"):
        FILTERS["zero_variance"](torch.zeros(4), 0)


def test_pass_rate_history_retires_at_the_threshold_for_good():
    h = PassRateHistory(pass_rate_threshold=0.9)
    c = torch.tensor([1] * 9 + [0] + [1] * 8 + [0] * 2).bool()        # 9/10 and 8/10
    h.update(["a", "b"], c, group_size=10)
    assert h.keep(["a", "b"]) == [False, True]
    assert h.pass_rate("a") == 0.9 and h.pass_rate("b") == 0.8 and h.pass_rate("z") is None
    h.update(["a"], torch.zeros(10).bool(), group_size=10)             # a later failure does not revive it
    assert h.keep(["a"]) == [False]
    assert h.counts["a"] == [9, 20] and h.summary() == {"seen": 2, "retired": 1}


def test_pass_rate_history_checks_ids():
    h = PassRateHistory()
    with pytest.raises(ValueError, match="prompt_ids"):
        h.update(["a"], torch.ones(8).bool(), group_size=4)
    with pytest.raises(ValueError, match="pass_rate_threshold"):
        PassRateHistory(pass_rate_threshold=1.5)


def test_overlong_penalty_by_hand():
    # L_max 20, L_cache 5: flat 0 up to 15, then (15 - L) / 5, -1 at 20 and beyond
    lengths = torch.tensor([0, 15, 16, 18, 20, 25])
    out = overlong_penalty(lengths, max_new_tokens=20, overlong_buffer=5)
    torch.testing.assert_close(out, torch.tensor([0.0, 0.0, -0.2, -0.6, -1.0, -1.0]))


def test_overlong_penalty_is_continuous_and_monotone():
    out = overlong_penalty(torch.arange(0, 40), max_new_tokens=32, overlong_buffer=8)
    assert torch.all(out[1:] <= out[:-1])
    assert torch.all((out[1:] - out[:-1]).abs() <= 1 / 8 + 1e-7)


def test_overlong_penalty_buffer_zero_is_off_and_bad_buffer_raises():
    assert torch.all(overlong_penalty(torch.tensor([0, 16]), max_new_tokens=16, overlong_buffer=0) == 0)
    with pytest.raises(ValueError, match="overlong_buffer"):
        overlong_penalty(torch.tensor([1]), max_new_tokens=16, overlong_buffer=17)
