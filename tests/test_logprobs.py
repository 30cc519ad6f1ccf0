"""The plain-torch reference and its chunked twin against an fp64 oracle written here, independently."""

from __future__ import annotations

import math

import pytest
import torch

from rlnb.logprobs import as_rows, chunk_rows, chunked_token_logprobs, token_logprobs


def oracle_grad(x, y, T, g, h):
    """fp64 logp, H and d(sum g logp + h H)/dx by the definitions (bf16 -> fp64 is exact)."""
    x64 = x.detach().double().requires_grad_()
    p = torch.softmax(x64 / T, -1)
    logp = torch.log(p.gather(-1, y.unsqueeze(-1)).squeeze(-1))
    H = -(p * torch.log(p)).sum(-1)
    (logp * g.double() + H * h.double()).sum().backward()
    return logp.detach(), H.detach(), x64.grad


def grad_tol(dtype, ref_grad):
    """fp32: rounding noise; bf16: one bf16 ulp of the largest gradient."""
    if dtype == torch.bfloat16:
        return 2.0 ** (math.floor(math.log2(ref_grad.abs().max().item())) - 7)
    return 1e-5 * max(1.0, ref_grad.abs().max().item())


def make(shape, V, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(*shape, V, generator=gen, dtype=torch.float64) * 3).to(dtype)
    y = torch.randint(0, V, shape, generator=gen)
    g, h = torch.randn(shape, generator=gen), torch.randn(shape, generator=gen)
    return x, y, g, h


def test_reference_hand_values():
    # p = (0.5, 0.25, 0.25): log p_1 = log 0.25, H = 0.5 log 2 + 2 * 0.25 log 4 = 1.5 log 2
    logits = torch.log(torch.tensor([[0.5, 0.25, 0.25]], dtype=torch.float64)) + 7.0  # shift-invariant
    logp, H = token_logprobs(logits, torch.tensor([1]), entropy=True)
    assert logp.dtype == torch.float32 and H.dtype == torch.float32
    assert logp.item() == pytest.approx(math.log(0.25), abs=1e-6)
    assert H.item() == pytest.approx(1.5 * math.log(2), abs=1e-6)
    # temperature 2 on logits log(p) * 2 gives back p
    logp2, _ = token_logprobs(torch.log(torch.tensor([[0.5, 0.25, 0.25]])) * 2, torch.tensor([0]), temperature=2.0)
    assert logp2.item() == pytest.approx(math.log(0.5), abs=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("T", [1.0, 0.7])
def test_reference_matches_fp64(dtype, T):
    x, y, g, h = make((37,), 1000, dtype)
    lp64, H64, grad64 = oracle_grad(x, y, T, g, h)
    xx = x.clone().requires_grad_()
    logp, H = token_logprobs(xx, y, temperature=T, entropy=True)
    (logp * g + H * h).sum().backward()
    assert (logp.double() - lp64).abs().max() < 1e-5
    assert (H.double() - H64).abs().max() < 1e-5
    assert (xx.grad.double() - grad64).abs().max() <= grad_tol(dtype, grad64)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("inplace", [False, True])
def test_chunked_matches_fp64(dtype, inplace):
    x, y, g, h = make((3, 13), 1000, dtype, seed=1)
    T = 0.7
    lp64, H64, grad64 = oracle_grad(x, y, T, g, h)
    leaf = x.clone().requires_grad_()
    xx = leaf * 1 if inplace else leaf  # in place: a non-leaf buffer that backward may overwrite
    logp, H = chunked_token_logprobs(xx, y, temperature=T, entropy=True, chunk_size=5, inplace=inplace)
    assert logp.shape == (3, 13) and H.shape == (3, 13)
    (logp * g + H * h).sum().backward()
    assert (logp.double() - lp64).abs().max() < 1e-5
    assert (H.double() - H64).abs().max() < 1e-5
    assert (leaf.grad.double() - grad64).abs().max() <= grad_tol(dtype, grad64)
    if inplace:  # the buffer now holds the gradient itself
        assert torch.equal(xx.detach(), leaf.grad)


def test_chunked_logp_only_and_entropy_only():
    x, y, g, h = make((29,), 300, torch.float32, seed=2)
    _, _, grad_g = oracle_grad(x, y, 1.0, g, torch.zeros_like(h))
    _, _, grad_h = oracle_grad(x, y, 1.0, torch.zeros_like(g), h)
    for upstream, ref in (("logp", grad_g), ("H", grad_h)):
        xx = x.clone().requires_grad_()
        logp, H = chunked_token_logprobs(xx, y, entropy=True, chunk_size=4)
        ((logp * g).sum() if upstream == "logp" else (H * h).sum()).backward()
        assert (xx.grad.double() - ref).abs().max() < 1e-5


def test_chunked_sliced_view_is_not_copied_and_correct():
    full, y, g, h = make((2, 9), 257, torch.float32, seed=3)
    x = full[:, :-1]                                  # (2, 8, 257): the usual shift, not contiguous
    assert as_rows(x).data_ptr() == full.data_ptr()   # viewed, not copied
    lp64, H64, _ = oracle_grad(x, y[:, :-1], 1.3, g[:, :-1], h[:, :-1])
    logp, H = chunked_token_logprobs(x, y[:, :-1], temperature=1.3, entropy=True, chunk_size=3)
    assert (logp.double() - lp64).abs().max() < 1e-5 and (H.double() - H64).abs().max() < 1e-5


def test_chunk_rows_budget():
    assert chunk_rows(1024, 151936) == (1 << 20) // 151936 == 6
    assert chunk_rows(10, 31) == 10          # a tiny vocabulary: one chunk covers every row
    assert chunk_rows(1024, 10**7) == 1
    with pytest.raises(ValueError, match="chunk_size"):
        chunk_rows(10, 10, 0)


@pytest.mark.parametrize("fn", [token_logprobs, chunked_token_logprobs])
def test_bad_inputs_raise_clear_errors(fn):
    x = torch.randn(2, 5)
    with pytest.raises(ValueError, match="targets: expected shape"):
        fn(x, torch.zeros(3, dtype=torch.long))
    with pytest.raises(TypeError, match="targets"):
        fn(x, torch.zeros(2))
    with pytest.raises(TypeError, match="logits"):
        fn(torch.zeros(2, 5, dtype=torch.long), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="temperature"):
        fn(x, torch.zeros(2, dtype=torch.long), temperature=0.0)
