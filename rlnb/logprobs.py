"""Per-token log-probabilities and entropies from logits: the plain-torch reference and its lean twin.

For each position with logits ``x`` (V numbers) and sampled token ``y``, at temperature ``T``:

    z = x / T,   lse = log sum_j exp(z_j),   logp = z_y - lse,   H = lse - sum_j p_j z_j = -sum_j p_j log p_j

Everything is reduced in fp32 whatever the input dtype. Two versions with one signature:

* :func:`token_logprobs` is the textbook version: ``log_softmax`` of the whole ``(..., V)`` tensor in fp32.
  Clear, but for a real vocabulary (V = 151936 for Qwen2.5) it holds several fp32 copies of the logits at
  once (the fp32 cast, ``log_softmax``, ``exp`` for the entropy, and autograd keeps some for backward):
  about 10x the bf16 logits.
* :func:`chunked_token_logprobs` walks the rows a few at a time, keeps only chunk-sized fp32 temporaries,
  saves per-token ``lse`` and ``H`` (not the softmax) and recomputes the softmax in backward, where it
  writes d logits straight into the gradient buffer, or into the logits themselves (``inplace=True``).

The gradient it writes, with upstream per-token gradients ``g`` (for logp) and ``h`` (for H):

    d logp / d z_j = 1[j = y] - p_j         d H / d z_j = -p_j (log p_j + H)
    d loss / d x_j = (g (1[j = y] - p_j) - h p_j (log p_j + H)) / T

so per token the backward needs only ``lse`` (to rebuild ``log p_j = z_j - lse``) and ``H``.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import torch

from rlnb.core.checks import check_token_ids

CHUNK_ELEMENTS = 1 << 20  # fp32 elements per temporary (4 MB): several fit in a CPU's last-level cache
CUDA_CHUNK_ELEMENTS = 1 << 25  # on a GPU, launches cost more than cache misses: 128 MB temporaries


def check_inputs(logits: torch.Tensor, targets: torch.Tensor, temperature: float, vocab_size: int | None = None) -> None:
    """Raise a clear error for inputs every backend rejects (``vocab_size``: V when ``logits`` stands in)."""
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point() or logits.dim() < 1:
        raise TypeError(f"logits: expected a floating-point tensor (..., V), got {type(logits).__name__}"
                        f" {getattr(logits, 'dtype', '')}")
    if not isinstance(targets, torch.Tensor) or targets.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"targets: expected an integer (long) tensor, got {getattr(targets, 'dtype', targets)}")
    if tuple(targets.shape) != tuple(logits.shape[:-1]):
        raise ValueError(f"targets: expected shape {tuple(logits.shape[:-1])} (logits without V), "
                         f"got {tuple(targets.shape)}")
    if not temperature > 0:
        raise ValueError(f"temperature: expected a positive number, got {temperature}")
    check_token_ids("targets", targets, logits.shape[-1] if vocab_size is None else vocab_size)


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, *, temperature: float = 1.0,
                   entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log pi(target) and (optionally) the entropy H per position, reduced in fp32.

    logits (..., V) any float dtype, targets (...) long -> logp (...) fp32, entropy (...) fp32 or None.

    >>> logits = torch.log(torch.tensor([[0.5, 0.25, 0.25]]))  # p = (1/2, 1/4, 1/4)
    >>> logp, H = token_logprobs(logits, torch.tensor([1]), entropy=True)
    >>> round(logp.item(), 4), round(H.item(), 4)  # log(1/4) = -1.3863; H = 1.5 log 2 = 1.0397
    (-1.3863, 1.0397)
    """
    check_inputs(logits, targets, temperature)
    logp_all = torch.log_softmax(logits.float() / temperature, dim=-1)  # (..., V) fp32
    logp = logp_all.gather(-1, targets.long().unsqueeze(-1)).squeeze(-1)
    ent = -(logp_all.exp() * logp_all).sum(-1) if entropy else None
    return logp, ent


# ---------------------------------------------------------------------------------------------------
# The chunked version: the same numbers, a few chunk-sized fp32 temporaries at any time.
# ---------------------------------------------------------------------------------------------------

def as_rows(x: torch.Tensor) -> torch.Tensor:
    """View (..., V) logits as (B', T', V) without copying.

    One run of rows if the leading dims flatten to a view (the usual case); a 3-d tensor sliced along T
    (``logits[:, :-1]``) stays 3-d so that it is not copied. Only exotic layouts are copied.
    """
    if x.dim() > 0 and x.stride(-1) != 1:
        x = x.contiguous()
    try:
        return x.view(1, -1, x.shape[-1])
    except RuntimeError:
        return x if x.dim() == 3 else x.reshape(1, -1, x.shape[-1])


def chunk_rows(n_rows: int, V: int, chunk_size: int | None = None, *, cuda: bool = False) -> int:
    """Rows per chunk: ``chunk_size`` if given, else as many as fit ``CHUNK_ELEMENTS`` (at least 1)."""
    if chunk_size is not None:
        if chunk_size < 1:
            raise ValueError(f"chunk_size: expected a positive number of rows, got {chunk_size}")
        return chunk_size
    budget = CUDA_CHUNK_ELEMENTS if cuda else CHUNK_ELEMENTS
    return max(1, min(n_rows, budget // max(V, 1)))


def _scaled_fp32(x: torch.Tensor, temperature: float) -> torch.Tensor:
    """A fresh fp32 copy of x / T that we may overwrite (a bf16 -> fp32 cast already copies)."""
    z = x.float() if x.dtype != torch.float32 else x.clone()
    return z.div_(temperature) if temperature != 1.0 else z


def chunk_forward(x: torch.Tensor, y: torch.Tensor, temperature: float, entropy: bool):
    """(C, V) logits, (C,) targets -> logp, lse, H (or None), all (C,) fp32.

    Six passes over the chunk: cast, max, shift, exp, sum, and one dot product for the entropy:
    with m = max z, s = sum exp(z - m):  lse = m + log s,  H = log s - sum exp(z - m) (z - m) / s.
    """
    z = _scaled_fp32(x, temperature)                           # (C, V) fp32 temporary no. 1
    m = z.amax(dim=-1, keepdim=True)                           # (C, 1)
    zy = z.gather(-1, y.unsqueeze(-1))                         # (C, 1) target logit, before the shift
    d = z.sub_(m)                                              # z - m, in place
    e = d.exp()                                                # (C, V) temporary no. 2
    s = e.sum(-1)                                              # (C,)
    lse = m.squeeze(-1) + s.log()
    logp = zy.squeeze(-1) - lse
    H = s.log() - torch.linalg.vecdot(e, d) / s if entropy else None
    return logp, lse, H


def chunk_grad(x: torch.Tensor, y: torch.Tensor, lse: torch.Tensor, H: torch.Tensor | None,
               g_logp: torch.Tensor, g_H: torch.Tensor | None, temperature: float) -> torch.Tensor:
    """d loss / d x for one chunk, fp32 (C, V), from the saved lse and H and the upstream g, h.

    grad_j = p_j * (a + b log p_j) plus g / T at the target, with a = -(g + h H) / T, b = -h / T:
    the per-row coefficients are folded so that each pass over the chunk does one thing.
    """
    logq = _scaled_fp32(x, temperature).sub_(lse.unsqueeze(-1))  # (C, V) log p_j
    p = logq.exp()                                                # (C, V)
    g, T = g_logp.unsqueeze(-1), temperature                     # (C, 1)
    if g_H is None:
        grad = p.mul_(-g / T)                                     # -g p_j / T
    else:
        h = g_H.unsqueeze(-1)                                     # (C, 1)
        a, b = -(g + h * H.unsqueeze(-1)) / T, -h / T
        grad = p.mul_(torch.addcmul(a, logq, b, out=logq))        # coefficient overwrites log p
    return grad.scatter_add_(-1, y.unsqueeze(-1), g / T)          # + g / T at the sampled token


def _chunks(rows: torch.Tensor, chunk: int):
    """(b, t0, t1) covering every row of a (B', T', V) tensor, ``chunk`` rows at a time."""
    return [(b, t0, min(t0 + chunk, rows.shape[1]))
            for b in range(rows.shape[0]) for t0 in range(0, rows.shape[1], chunk)]


def _for_each_chunk(fn, jobs: list, cpu: bool) -> None:
    """Run ``fn(job)`` for every chunk; on CPU, chunks go to one single-threaded worker per torch thread.

    Why not let each op use all threads: a chunk's op is small, and every multi-threaded op ends with a
    barrier. When other processes share the cores, a descheduled thread stalls that barrier for a whole
    time slice, thousands of times per call: measured 4-9x slower than one thread on a busy 2-core
    machine. Independent single-threaded workers never wait for each other.
    """
    workers = min(torch.get_num_threads(), len(jobs)) if cpu else 1
    if workers <= 1:
        for job in jobs:
            fn(job)
        return

    def work(job):
        with torch.no_grad():                    # grad mode is per thread; these are plain buffers
            fn(job)

    threads = torch.get_num_threads()
    try:
        list(_pool(workers).map(work, jobs))
    finally:
        torch.set_num_threads(threads)           # the workers' setting reaches the BLAS library's too


_POOLS: dict[int, ThreadPoolExecutor] = {}


def _pool(workers: int) -> ThreadPoolExecutor:
    """One pool of single-threaded workers per size, made once and reused (creating one costs ~0.1 s a step)."""
    if workers not in _POOLS:
        _POOLS[workers] = ThreadPoolExecutor(workers, initializer=torch.set_num_threads, initargs=(1,))
    return _POOLS[workers]


class ChunkedTokenLogprobs(torch.autograd.Function):
    """Autograd for the chunked path: saves logits (no copy), targets, lse and H; recomputes p in backward."""

    @staticmethod
    def forward(ctx, rows, y, temperature, entropy, chunk, inplace):  # rows (B', T', V), y (B', T')
        logp = rows.new_empty(y.shape, dtype=torch.float32)   # (B', T')
        lse = torch.empty_like(logp)
        H = torch.empty_like(logp) if entropy else None

        def one(job):
            b, t0, t1 = job
            lp, ls, h = chunk_forward(rows[b, t0:t1], y[b, t0:t1], temperature, entropy)
            logp[b, t0:t1], lse[b, t0:t1] = lp, ls
            if entropy:
                H[b, t0:t1] = h

        _for_each_chunk(one, _chunks(rows, chunk), not rows.is_cuda)
        ctx.save_for_backward(rows, y, lse, H)
        ctx.temperature, ctx.chunk, ctx.inplace = temperature, chunk, inplace
        ctx.mark_non_differentiable(lse)
        ctx.set_materialize_grads(False)  # an unused output's gradient arrives as None: skip its work
        return logp, (H if entropy else lse.new_empty(0)), lse

    @staticmethod
    def backward(ctx, g_logp, g_H, _g_lse):
        rows, y, lse, H = ctx.saved_tensors
        if g_logp is None:
            g_logp = torch.zeros_like(lse)
        g_H = g_H if H is not None else None
        out = rows if ctx.inplace else torch.empty(rows.shape, dtype=rows.dtype, device=rows.device)

        def one(job):
            sl = (job[0], slice(job[1], job[2]))
            h, gh = (H[sl], g_H[sl]) if g_H is not None else (None, None)
            out[sl] = chunk_grad(rows[sl], y[sl], lse[sl], h, g_logp[sl], gh, ctx.temperature)  # -> logits dtype

        _for_each_chunk(one, _chunks(rows, ctx.chunk), not rows.is_cuda)
        return out, None, None, None, None, None


def chunked_token_logprobs(logits: torch.Tensor, targets: torch.Tensor, *, temperature: float = 1.0,
                           entropy: bool = False, chunk_size: int | None = None,
                           inplace: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Same as :func:`token_logprobs`, holding only a few ``chunk_size x V`` fp32 temporaries.

    chunk_size: rows per chunk (default: ``CHUNK_ELEMENTS // V``). inplace: backward writes d logits
    into the logits' own storage and returns it as their gradient, so no gradient buffer is allocated.
    Use it only when nothing else needs the logits after backward (true for ``logits = lm_head(h)``:
    the matmul's backward needs ``h`` and the weight, not its output).

    >>> x = torch.randn(2, 3, 50, dtype=torch.float64); y = torch.randint(0, 50, (2, 3))
    >>> a, b = chunked_token_logprobs(x, y, entropy=True, chunk_size=2), token_logprobs(x, y, entropy=True)
    >>> torch.allclose(a[0], b[0]) and torch.allclose(a[1], b[1])
    True
    """
    check_inputs(logits, targets, temperature)
    rows = as_rows(logits)                                     # (B', T', V)
    y = targets.long().reshape(rows.shape[:2])                 # (B', T')
    chunk = chunk_rows(rows.shape[1], rows.shape[2], chunk_size, cuda=rows.is_cuda)
    logp, H, _ = ChunkedTokenLogprobs.apply(rows, y, float(temperature), entropy, chunk, inplace)
    shape = logits.shape[:-1]
    return logp.reshape(shape), (H.reshape(shape) if entropy else None)
