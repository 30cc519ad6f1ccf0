"""Triton kernels against an fp64 oracle and the torch reference: forward and logits gradient.

On a machine without CUDA the kernels run in Triton's interpreter (``TRITON_INTERPRET=1`` must be set
before the kernels are defined, hence the first lines). With CUDA the same tests run compiled.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import math  # noqa: E402

import pytest  # noqa: E402

import rlnb.kernels as K  # noqa: E402
from rlnb.kernels.launch import MAX_GRID_X, launch_config  # noqa: E402
from rlnb.kernels.loss_terms import token_loss_terms  # noqa: E402
from tests.test_logprobs import make  # noqa: E402  (the same irregular inputs as the reference's tests)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
if not K.triton_available():
    pytest.skip("Triton is not importable on this machine: nothing to test here", allow_module_level=True)




def oracle(x, y, T):
    """fp64 logp and H by the definitions, differentiable w.r.t. the returned leaf."""
    x64 = x.detach().double().cpu().requires_grad_()
    p = torch.softmax(x64 / T, -1)
    logp = torch.log(p.gather(-1, y.cpu().unsqueeze(-1)).squeeze(-1))
    return x64, logp, -(p * torch.log(p)).sum(-1)


def grad_tol(dtype, ref):
    """fp32: rounding noise; bf16: one bf16 ulp of the largest gradient."""
    if dtype == torch.bfloat16:
        return 2.0 ** (math.floor(math.log2(ref.abs().max().item())) - 7)
    return 2e-6 * max(1.0, ref.abs().max().item())


def run_triton(x, y, *, T, entropy, block_v=None):
    """Through the dispatcher's internal call, so a test can force small vocabulary blocks."""
    return K._triton_call(x, y, None, None, None, K.KernelSpec(T, entropy, block_v=block_v))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("block_v", [256, None])   # 256: four loop steps, a ragged last block (1000 % 256)
def test_logprobs_forward_and_grad_match_fp64(dtype, block_v):
    x, y, g, h = make((37,), 1000, dtype)
    T = 0.7
    x64, lp64, H64 = oracle(x, y, T)
    (lp64 * g.double() + H64 * h.double()).sum().backward()
    xx = x.to(DEVICE).requires_grad_()
    logp, H, *_ = run_triton(xx, y.to(DEVICE), T=T, entropy=True, block_v=block_v)
    (logp * g.to(DEVICE) + H * h.to(DEVICE)).sum().backward()
    assert (logp.double().cpu() - lp64).abs().max() < 1e-5
    assert (H.double().cpu() - H64).abs().max() < 1e-5
    assert (xx.grad.double().cpu() - x64.grad).abs().max() <= grad_tol(dtype, x64.grad)


def test_public_api_matches_reference_on_sliced_3d_view_in_place():
    full, y, g, h = make((3, 8), 333, torch.bfloat16, seed=1)
    leaf = full.to(DEVICE).requires_grad_()
    x = (leaf * 1)[:, :-1]                             # (3, 7, 333): non-contiguous rows, no copy
    y, g, h = y[:, :-1], g[:, :-1], h[:, :-1]
    logp, H = K.token_logprobs(x, y.to(DEVICE), temperature=1.3, entropy=True, backend="triton", inplace=True)
    (logp * g.to(DEVICE) + H * h.to(DEVICE)).sum().backward()
    x64, lp64, H64 = oracle(full[:, :-1], y, 1.3)
    (lp64 * g.double() + H64 * h.double()).sum().backward()
    assert logp.shape == (3, 7)
    assert (logp.double().cpu() - lp64).abs().max() < 1e-5 and (H.double().cpu() - H64).abs().max() < 1e-5
    got = leaf.grad[:, :-1].double().cpu()
    assert (got - x64.grad).abs().max() <= grad_tol(torch.bfloat16, x64.grad)
    assert torch.equal(x.detach(), leaf.grad[:, :-1])  # in place: the logits buffer holds the gradient
    assert leaf.grad[:, -1].abs().max() == 0           # the sliced-off position gets none


def test_logp_only_gradient_without_entropy():
    x, y, g, _ = make((19,), 500, torch.float32, seed=2)
    g[::3] = 0.0                                       # dead rows (masked tokens): the kernel skips their reads
    x64, lp64, _ = oracle(x, y, 1.0)
    (lp64 * g.double()).sum().backward()
    xx = x.to(DEVICE).requires_grad_()
    logp, H = K.token_logprobs(xx, y.to(DEVICE), backend="triton")
    (logp * g.to(DEVICE)).sum().backward()
    assert H is None
    assert (xx.grad.double().cpu() - x64.grad).abs().max() <= grad_tol(torch.float32, x64.grad)
    assert xx.grad[::3].abs().max() == 0


LOSSES = [("pg", {}), ("ppo_clip", {}), ("ppo_clip", {"dual_clip_c": 1.3}), ("cispo", {}),
          ("cispo", {"eps_low": 0.3, "cispo_cap": 1.5}), ("ppo_clip", {"eps_low": 0.1, "eps_high": 0.28})]


@pytest.mark.parametrize("loss,extra", LOSSES)
def test_fused_loss_matches_fp64_terms_and_grad(loss, extra):
    B, T_, V = 4, 9, 700
    x, y, g, h = make((B, T_), V, torch.bfloat16, seed=3)
    gen = torch.Generator().manual_seed(4)
    x64, lp64, H64 = oracle(x, y, 0.9)
    old = (lp64.detach() + 0.5 * torch.randn(B, T_, generator=gen, dtype=torch.float64)).float()  # rho ~ 0.6..1.6
    adv = torch.randn(B, generator=gen)
    mask = (torch.rand(B, T_, generator=gen) > 0.2).float()
    args = dict(loss=loss, **extra)
    ref = token_loss_terms(lp64, old.double(), adv.double(), mask.double(), **args)   # the zoo's definition
    gl = torch.randn(B, T_, generator=gen)
    (ref[0] * gl.double() + lp64 * g.double() + H64 * h.double()).sum().backward()
    xx = x.to(DEVICE).requires_grad_()
    d = lambda t: t.to(DEVICE)  # noqa: E731
    out = K.fused_token_loss(xx, d(y), d(old), d(adv), d(mask), temperature=0.9, entropy=True, backend="triton", **args)
    (out.loss * d(gl) + out.logp * d(g) + out.entropy * d(h)).sum().backward()
    for got, want in zip((out.loss, out.ratio, out.weight), (ref[0], ref[1], ref[4]), strict=True):
        want = want.detach()
        assert (got.double().cpu() - want).abs().max() < 2e-6 * (1 + want.abs().max())  # fp32 rounding
    assert torch.equal(out.clipped_low.cpu(), ref[2]) and torch.equal(out.clipped_high.cpu(), ref[3])
    assert (xx.grad.double().cpu() - x64.grad).abs().max() <= grad_tol(torch.bfloat16, x64.grad)


def test_fused_loss_chunked_backend_equals_triton():
    x, y, _, _ = make((3, 5), 400, torch.float32, seed=5)
    old, adv, mask = torch.full((3, 5), -6.0), torch.tensor([1.0, -1.0, 0.5]), torch.ones(3, 5)
    outs = [K.fused_token_loss(*(t.to(DEVICE) for t in (x, y, old, adv, mask)), loss="cispo", eps_high=0.3,
                               backend=b) for b in ("chunked", "triton")]
    for a, b in zip(outs[0], outs[1], strict=True):
        if a is not None:
            assert torch.allclose(a.float(), b.float(), atol=2e-5)


def test_kernel_loss_hand_values():
    # logits log(0.4, 0.3, 0.2, 0.1): logp of tokens 0, 1, 3; old_logp chosen so rho = 1.5, 0.5, 4
    x = torch.log(torch.tensor([0.4, 0.3, 0.2, 0.1])).expand(1, 3, 4).contiguous().to(DEVICE)
    y = torch.tensor([[0, 1, 3]], device=DEVICE)
    p = torch.tensor([[0.4, 0.3, 0.1]])
    old = torch.log(p / torch.tensor([[1.5, 0.5, 4.0]])).to(DEVICE)
    m = torch.ones(1, 3, device=DEVICE)
    run = lambda A, **kw: K.fused_token_loss(x, y, old, torch.tensor([A], device=DEVICE), m,  # noqa: E731
                                             backend="triton", **kw)
    out = run(-1.0, loss="ppo_clip", eps_low=0.2, eps_high=0.2, dual_clip_c=3.0)
    # A = -1: max(rho, clip(rho, .8, 1.2)) = 1.5, 0.8, 4 -> dual clip caps the last at c = 3
    assert torch.allclose(out.loss.cpu(), torch.tensor([[1.5, 0.8, 3.0]]), atol=1e-6)
    assert out.clipped_low.tolist() == [[False, True, False]] and out.clipped_high.tolist() == [[False, False, True]]
    assert torch.allclose(out.weight.cpu(), torch.tensor([[-1.5, 0.0, 0.0]]), atol=1e-6)
    out = run(2.0, loss="cispo", eps_high=0.3)          # weight A min(rho, 1.3); no lower bound by default
    assert torch.allclose(out.weight.cpu(), torch.tensor([[2.6, 1.0, 2.6]]), atol=1e-6)
    assert torch.allclose(out.loss.cpu(), -torch.tensor([[2.6, 1.0, 2.6]]) * torch.log(p), atol=1e-6)
    assert out.clipped_high.tolist() == [[True, False, True]] and not out.clipped_low.any()
    out = run(2.0, loss="pg")
    assert torch.allclose(out.loss.cpu(), -2 * torch.log(p), atol=1e-6)
    assert not (out.clipped_low.any() or out.clipped_high.any())
    with pytest.raises(ValueError, match="dual_clip_c"):
        run(1.0, loss="cispo", dual_clip_c=3.0)          # not a hyperparameter of CISPO


def test_fused_linear_matches_fp64():
    gen = torch.Generator().manual_seed(6)
    N, Hd, V = 37, 16, 1000
    hid = torch.randn(N, Hd, generator=gen, dtype=torch.float64)
    W = torch.randn(V, Hd, generator=gen, dtype=torch.float64) * 0.5
    y = torch.randint(0, V, (N,), generator=gen)
    g, h = torch.randn(N, generator=gen), torch.randn(N, generator=gen)
    h64, W64 = hid.clone().requires_grad_(), W.clone().requires_grad_()
    p = torch.softmax(h64 @ W64.T / 0.8, -1)
    lp64, H64 = torch.log(p.gather(-1, y[:, None]).squeeze(-1)), -(p * torch.log(p)).sum(-1)
    (lp64 * g.double() + H64 * h.double()).sum().backward()
    for backend in ("chunked", "triton"):
        hh, WW = hid.float().to(DEVICE).requires_grad_(), W.float().to(DEVICE).requires_grad_()
        logp, H = K.linear_token_logprobs(hh, WW, y.to(DEVICE), temperature=0.8, entropy=True, chunk_size=8,
                                          backend=backend)
        (logp * g.to(DEVICE) + H * h.to(DEVICE)).sum().backward()
        assert (logp.double().cpu() - lp64).abs().max() < 2e-5, backend
        assert (H.double().cpu() - H64).abs().max() < 2e-5, backend
        assert (hh.grad.double().cpu() - h64.grad).abs().max() < 1e-4 * h64.grad.abs().max(), backend
        assert (WW.grad.double().cpu() - W64.grad).abs().max() < 1e-4 * W64.grad.abs().max(), backend


def test_launch_grid_is_flat_for_a_65536_token_sequence():
    cfg = launch_config(65536, 151936, 2)
    assert cfg.grid == (65536,) and len(cfg.grid) == 1    # one axis: y/z would stop at 65535
    assert 65535 * 151936 > 2**31 - 1                      # why the kernel widens the row index to int64
    assert launch_config(1, 151936, 4).BLOCK_V == 2048 and launch_config(5, 31, 2).BLOCK_V == 32
    with pytest.raises(ValueError, match="n_rows"):
        launch_config(MAX_GRID_X + 1, 10, 2)
    with pytest.raises(ValueError, match="block_v"):
        launch_config(4, 100, 2, block_v=100)


def test_dispatcher_choices_and_errors(monkeypatch):
    assert K.triton_status().startswith("triton 3.")
    x = torch.zeros(2, 3)
    assert K.resolve_backend(x) == ("triton" if x.is_cuda else "chunked")
    try:
        K.set_backend("torch")
        assert K.resolve_backend(x) == "torch" and K.resolve_backend(x, "chunked") == "chunked"
    finally:
        K.set_backend("auto")
    with pytest.raises(ValueError, match="backend"):
        K.set_backend("cuda")
    with pytest.raises(KeyError, match="known"):
        K.fused_token_loss(x, torch.zeros(2, dtype=torch.long), torch.zeros(2), torch.zeros(2), torch.ones(2),
                           loss="gspo")
    with pytest.raises(ValueError, match="token ids"):
        K.token_logprobs(torch.zeros(2, 3, device=DEVICE), torch.tensor([0, 3], device=DEVICE), backend="triton")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(RuntimeError, match="CUDA"):
        K.resolve_backend(torch.zeros(2, 3), "triton")
