"""Aggregations: per-token weights by hand, padding independence, dropped rows, gradcheck."""

import pytest
import torch

from rlnb.algos import AGGREGATIONS, hyper_names

F64 = torch.float64
L = 8  # max_new_tokens in these tests
KW = {"group_size": 2, "max_new_tokens": L}


def _agg(name, loss, mask, **kw):
    fn = AGGREGATIONS[name]                                            # pass only what fn takes, as bind does
    return fn(loss, mask, **{k: v for k, v in {**KW, **kw}.items() if k in hyper_names(fn)})


def _token_weights(name, mask, **kw):
    """d(scalar)/d loss_{i,t}: the weight each token gets."""
    loss = torch.zeros(mask.shape, dtype=F64, requires_grad=True)
    _agg(name, loss, mask, **kw).backward()
    return loss.grad


# one long (4 tokens) and one short (1 token) completion in one group of 2
MASK = torch.tensor([[1, 1, 1, 1, 0], [1, 0, 0, 0, 0]], dtype=F64)


@pytest.mark.parametrize("name, long_w, short_w", [
    ("token-mean", 1 / 5, 1 / 5),                      # 5 tokens in total
    ("token-sum", 1.0, 1.0),                           # no normaliser
    ("seq-mean-token-mean", 1 / (2 * 4), 1 / (2 * 1)),  # 1 / (n_rows |o_i|): the length bias
    ("seq-mean-token-sum", 1 / 2, 1 / 2),
    ("seq-mean-token-sum-norm", 1 / (2 * L), 1 / (2 * L)),
    ("prompt-mean", 1 / 5, 1 / 5),                     # one prompt, 5 tokens
])
def test_per_token_weights_by_hand(name, long_w, short_w):
    w = _token_weights(name, MASK)
    expected = torch.tensor([[long_w] * 4 + [0.0], [short_w] + [0.0] * 4], dtype=F64)
    torch.testing.assert_close(w, expected)


def test_prompt_mean_weighs_prompts_equally():
    # prompt 0: 5 tokens, prompt 1: 2 tokens -> tokens weigh 1/(2*5) and 1/(2*2)
    mask = torch.cat([MASK, torch.tensor([[1, 0, 0, 0, 0], [1, 0, 0, 0, 0]], dtype=F64)])
    w = _token_weights("prompt-mean", mask)
    torch.testing.assert_close(w[:2][MASK.bool()], torch.full((5,), 0.1, dtype=F64))
    torch.testing.assert_close(w[2:, 0], torch.full((2,), 0.25, dtype=F64))


def test_seq_mean_token_sum_norm_is_independent_of_padding_width():
    g = torch.Generator().manual_seed(0)
    loss = torch.randn(4, 5, generator=g, dtype=F64)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0], [1, 1, 0, 0, 0]], dtype=F64)
    base = _agg("seq-mean-token-sum-norm", loss, mask)
    for extra in (1, 3):
        wide_loss = torch.cat([loss, torch.randn(4, extra, generator=g, dtype=F64)], 1)  # garbage in padding
        wide_mask = torch.cat([mask, torch.zeros(4, extra, dtype=F64)], 1)
        torch.testing.assert_close(_agg("seq-mean-token-sum-norm", wide_loss, wide_mask), base)
    torch.testing.assert_close(base, (loss * mask).sum() / (4 * L))


def test_seq_mean_token_sum_norm_rejects_a_constant_shorter_than_the_batch():
    with pytest.raises(ValueError, match="max_new_tokens"):
        _agg("seq-mean-token-sum-norm", torch.zeros(2, 9), torch.ones(2, 9))
    with pytest.raises(TypeError):
        AGGREGATIONS["seq-mean-token-sum-norm"](torch.zeros(2, 3), torch.ones(2, 3))  # L is required


@pytest.mark.parametrize("name", sorted(AGGREGATIONS))
def test_dropped_rows_are_left_out_of_denominators(name):
    """Zeroing a whole group's mask gives the value of the batch without that group."""
    g = torch.Generator().manual_seed(1)
    loss = torch.randn(6, 4, generator=g, dtype=F64)
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]],
                        dtype=F64)
    dropped = mask.clone()
    dropped[2:4] = 0                                                   # the middle group (G = 2) is filtered
    kept = torch.tensor([True, True, False, False, True, True])
    torch.testing.assert_close(_agg(name, loss, dropped), _agg(name, loss[kept], mask[kept]))


@pytest.mark.parametrize("name", sorted(AGGREGATIONS))
def test_single_dropped_row_is_deleted_row(name):
    """Overlong filtering drops one row; prompt-mean then averages the group's remaining tokens."""
    loss = torch.tensor([[1.0, 2.0], [10.0, 10.0], [3.0, 0.0], [5.0, 7.0]], dtype=F64)
    mask = torch.tensor([[1, 1], [0, 0], [1, 0], [1, 1]], dtype=F64)
    expected = {
        "token-mean": (1 + 2 + 3 + 5 + 7) / 5,
        "token-sum": 1 + 2 + 3 + 5 + 7,
        "seq-mean-token-mean": (1.5 + 3 + 6) / 3,
        "seq-mean-token-sum": (3 + 3 + 12) / 3,
        "seq-mean-token-sum-norm": (3 + 3 + 12) / (3 * L),
        "prompt-mean": (3 / 2 + 15 / 3) / 2,
    }[name]
    assert abs(_agg(name, loss, mask).item() - expected) < 1e-12


@pytest.mark.parametrize("name", sorted(AGGREGATIONS))
def test_everything_dropped_gives_zero_not_nan(name):
    loss = torch.randn(4, 3, dtype=F64, requires_grad=True)
    out = _agg(name, loss, torch.zeros(4, 3, dtype=F64))
    out.backward()
    assert out.item() == 0.0 and torch.all(loss.grad == 0)


@pytest.mark.parametrize("name", sorted(AGGREGATIONS))
def test_gradcheck(name):
    g = torch.Generator().manual_seed(2)
    loss = torch.randn(4, 5, generator=g, dtype=F64, requires_grad=True)
    mask = (torch.rand(4, 5, generator=g) > 0.3).to(F64)
    assert torch.autograd.gradcheck(lambda x: _agg(name, x, mask), (loss,))


def test_prompt_mean_needs_a_dividing_group_size():
    with pytest.raises(ValueError, match="group_size"):
        AGGREGATIONS["prompt-mean"](torch.zeros(5, 2), torch.ones(5, 2), group_size=2)


@pytest.mark.parametrize("name", sorted(AGGREGATIONS))
def test_shape_mismatch_raises(name):
    with pytest.raises(ValueError, match="mask"):
        _agg(name, torch.zeros(2, 3), torch.ones(2, 4))


def test_length_bias_long_wrong_answer_is_pushed_less_per_token():
    """seq-mean-token-mean: a long wrong answer's tokens get 1/4 of a short one's push; token-mean: equal."""
    w_seq, w_tok = _token_weights("seq-mean-token-mean", MASK), _token_weights("token-mean", MASK)
    assert w_seq[0, 0] / w_seq[1, 0] == 0.25 and w_tok[0, 0] == w_tok[1, 0]


def test_token_sum_is_token_mean_times_the_token_count_and_grows_with_the_batch():
    g = torch.Generator().manual_seed(3)
    loss = torch.randn(4, 5, generator=g, dtype=F64)
    mask = (torch.rand(4, 5, generator=g) > 0.3).to(F64)
    torch.testing.assert_close(_agg("token-sum", loss, mask), _agg("token-mean", loss, mask) * mask.sum())
    doubled = _agg("token-sum", torch.cat([loss, loss]), torch.cat([mask, mask]))
    torch.testing.assert_close(doubled, 2 * _agg("token-sum", loss, mask))   # token-mean would not move
