"""Fused linear + token log-probs: hidden states x lm_head in row chunks, so full logits never exist.

For N tokens, hidden size H and vocabulary V, ``logits = hidden @ weight.T`` is (N, V): at N = 16384 and
V = 151936 that is 5 GB in bf16, far more than the hidden states (N x H). Here the rows go through in
chunks of C: each chunk's (C, V) logits are made, reduced to logp / lse / H by the row kernels, and
dropped. Backward makes each chunk's logits again, turns them into d logits *in place*, and multiplies:

    d hidden[c] = d logits[c] @ weight          d weight += d logits[c].T @ hidden[c]   (fp32 accumulator)

Cost: 2NHV flops forward, 6NHV backward (the recompute plus two grads), 8NHV in all, against 6NHV when
the logits are kept. Libraries that know the loss is the final scalar compute the gradients during the
forward pass and skip the recompute; we keep the general autograd contract (any upstream gradient on
logp and H, e.g. a per-token loss or an entropy bonus) and pay one more matmul.
"""

from __future__ import annotations

import torch

from rlnb.kernels.launch import next_pow2
from rlnb.logprobs import chunk_forward, chunk_grad, chunk_rows

LINEAR_CHUNK_FLOOR = 1 << 24  # elements: a 64 MB fp32 chunk of logits at most this small


def linear_chunk_rows(N: int, H: int, V: int, chunk_size: int | None = None) -> int:
    """Rows per chunk: a (C, V) logits chunk about as large as the (N, H) hidden states, and at least
    ``LINEAR_CHUNK_FLOOR`` elements (fewer rows would re-read the whole (V, H) weight per handful of tokens:
    a small hidden size then pays in memory traffic, not flops), rounded to a power of two.

    >>> linear_chunk_rows(16384, 1536, 151936)
    256
    >>> linear_chunk_rows(100, 128, 31)
    100
    """
    if chunk_size is not None:
        if chunk_size < 1:
            raise ValueError(f"chunk_size: expected a positive number of rows, got {chunk_size}")
        return min(chunk_size, max(N, 1))
    rows = max(N * H, LINEAR_CHUNK_FLOOR) // max(V, 1)
    return max(1, min(N, next_pow2(max(1, rows))))


class TorchRows:
    """Row ops in plain torch, in sub-chunks of ``CHUNK_ELEMENTS`` so fp32 temporaries stay small."""

    @staticmethod
    def _subs(x: torch.Tensor):
        step = chunk_rows(x.shape[0], x.shape[1], cuda=x.is_cuda)
        return [slice(i, min(i + step, x.shape[0])) for i in range(0, x.shape[0], step)]

    @staticmethod
    def forward(logits, y, temperature, entropy):  # (C, V), (C,) -> logp, lse, H
        parts = [chunk_forward(logits[s], y[s], temperature, entropy) for s in TorchRows._subs(logits)]
        logp, lse, H = (torch.cat([p[i] for p in parts]) if parts[0][i] is not None else None for i in range(3))
        return logp, lse, H

    @staticmethod
    def backward_(logits, y, lse, H, g, h, temperature):  # writes d logits over logits
        for s in TorchRows._subs(logits):
            logits[s] = chunk_grad(logits[s], y[s], lse[s], H[s] if h is not None else None, g[s],
                                   h[s] if h is not None else None, temperature)


class TritonRows:
    """Row ops through the Triton kernels (imported lazily: Triton is optional)."""

    @staticmethod
    def forward(logits, y, temperature, entropy):
        from rlnb.kernels.token_loss import row_forward
        o = row_forward(logits[None], y, temperature=temperature, entropy=entropy)
        return o["logp"], o["lse"], o["H"]

    @staticmethod
    def backward_(logits, y, lse, H, g, h, temperature):
        from rlnb.kernels.token_loss import row_backward
        row_backward(logits[None], y, lse, H, g, h, temperature=temperature, out=logits[None])


class LinearTokenLogprobs(torch.autograd.Function):
    """Saves hidden, weight, targets, lse and H: O(N H + V H), never O(N V)."""

    @staticmethod
    def forward(ctx, hidden, weight, y, temperature, entropy, chunk, ops):  # (N, H), (V, H), (N,)
        N = hidden.shape[0]
        logp = hidden.new_empty(N, dtype=torch.float32)
        lse, H = torch.empty_like(logp), (torch.empty_like(logp) if entropy else None)
        for i in range(0, N, chunk):
            c = slice(i, min(i + chunk, N))
            lp, ls, h = ops.forward(hidden[c] @ weight.T, y[c], temperature, entropy)  # (C, V) lives here only
            logp[c], lse[c] = lp, ls
            if entropy:
                H[c] = h
        ctx.save_for_backward(hidden, weight, y, lse, H)
        ctx.temperature, ctx.chunk, ctx.ops = temperature, chunk, ops
        ctx.set_materialize_grads(False)
        return logp, (H if entropy else logp.new_empty(0))

    @staticmethod
    def backward(ctx, g_logp, g_H):
        hidden, weight, y, lse, H = ctx.saved_tensors
        g = torch.zeros_like(lse) if g_logp is None else g_logp
        h = g_H if H is not None else None
        d_hidden = torch.empty_like(hidden) if ctx.needs_input_grad[0] else None
        d_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) \
            if ctx.needs_input_grad[1] else None
        for i in range(0, hidden.shape[0], ctx.chunk):
            c = slice(i, min(i + ctx.chunk, hidden.shape[0]))
            d_logits = hidden[c] @ weight.T                  # (C, V) recomputed ...
            ctx.ops.backward_(d_logits, y[c], lse[c], H[c] if H is not None else None, g[c],
                              h[c] if h is not None else None, ctx.temperature)  # ... and overwritten
            if d_hidden is not None:
                d_hidden[c] = d_logits @ weight              # (C, H)
            if d_weight is not None:
                d_weight.add_(d_logits.T @ hidden[c])       # (V, H): each chunk's product rounded once
        return d_hidden, (d_weight.to(weight.dtype) if d_weight is not None else None), None, None, None, None, None
