"""Triton kernels for the token-level loss: one pass forward, one pass backward, no softmax in memory.

What: for each token row of logits x (V numbers), its sampled token y and temperature T, compute
logp = z_y - lse and the entropy H (z = x / T), and, for losses defined per token, the loss itself,
the ratio rho = exp(logp - old_logp), TRL's clip flags and the weight -d loss / d logp. Backward writes
d x from the upstream per-token gradients, optionally over x itself.

Why: the reference (``rlnb.logprobs.token_logprobs``) on bf16 logits reads 2 bytes per logit and then
writes and re-reads fp32 copies: the cast (4 B), ``log_softmax`` (4 B), its ``exp`` for the entropy
(4 B), the product (4 B), and backward as much again; autograd keeps several alive at once. Per logit
that is ~30-40 bytes of memory traffic and ~10x the bf16 logits in memory. The minimum is 2 bytes
read forward, and 2 read + 2 written backward. The kernels below do that minimum:

* forward: a running (online) logsumexp. Keep m = max so far, s = sum exp(z - m) and
  t = sum exp(z - m) (z - m); when a block raises the max to m', rescale by alpha = exp(m - m'):
  s' = alpha s + sum_block exp(z - m'),  t' = alpha (t + (m - m') s) + sum_block exp(z - m') (z - m').
  At the end lse = m + log s and H = log s - t / s (no cancellation: all terms are relative to m).
* backward: rebuild p_j = exp(z_j - lse) block by block from the saved lse and write
  d x_j = (g (1[j = y] - p_j) - h p_j (log p_j + H)) / T.

Rows are flattened into grid axis 0 (see ``launch.py``); the row's address is computed in int64.
Logits may be a (B, T, V) view sliced along T (``logits[:, :-1]``): rows are addressed through two
strides, so no copy is made.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from rlnb.kernels.launch import launch_config


@triton.jit
def _row_start(x_ptr, row, T_rows, stride_b, stride_t):
    """Address of row ``row`` (already int64) of a (B', T', V) tensor with unit stride along V."""
    return x_ptr + (row // T_rows) * stride_b + (row % T_rows) * stride_t


@triton.jit
def _fwd_kernel(x_ptr, T_rows, stride_b, stride_t, y_ptr, V, inv_T,
                logp_ptr, lse_ptr, H_ptr,
                old_ptr, adv_ptr, mask_ptr, loss_ptr, ratio_ptr, low_ptr, high_ptr, w_ptr,
                lo, hi, dual_c,
                ENTROPY: tl.constexpr, LOSS: tl.constexpr, DUAL: tl.constexpr, BLOCK_V: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)                    # int64: row * stride can pass 2**31
    x_row = _row_start(x_ptr, row, T_rows, stride_b, stride_t)
    cols = tl.arange(0, BLOCK_V)
    m = tl.full([], -3.0e38, tl.float32)                  # running max (finite: avoids inf - inf)
    s = tl.zeros([], tl.float32)                          # sum exp(z - m)
    t = tl.zeros([], tl.float32)                          # sum exp(z - m) (z - m)
    for start in range(0, V, BLOCK_V):
        valid = start + cols < V
        # Load: BLOCK_V logits of this row, in their own dtype (the only read of x), upcast in registers.
        z = tl.load(x_row + start + cols, mask=valid, other=float("-inf")).to(tl.float32) * inv_T
        m_new = tl.maximum(m, tl.max(z, axis=0))
        alpha = tl.exp(m - m_new)
        d = tl.where(valid, z - m_new, float("-inf"))    # padding lanes: exp(-inf) = 0 below
        e = tl.exp(d)
        if ENTROPY:
            ed = e * tl.where(valid, d, 0.0)              # not 0 * -inf = nan on padding lanes
            t = alpha * (t + (m - m_new) * s) + tl.sum(ed, axis=0)
        s = alpha * s + tl.sum(e, axis=0)
        m = m_new
    # Load: the target's logit, one scalar. Store: three floats per row.
    y = tl.load(y_ptr + row)
    lse = m + tl.log(s)
    logp = tl.load(x_row + y).to(tl.float32) * inv_T - lse
    tl.store(logp_ptr + row, logp)
    tl.store(lse_ptr + row, lse)
    if ENTROPY:
        tl.store(H_ptr + row, tl.log(s) - t / s)
    if LOSS >= 0:
        _loss_epilogue(row, logp, old_ptr, adv_ptr, mask_ptr, loss_ptr, ratio_ptr, low_ptr, high_ptr, w_ptr,
                       lo, hi, dual_c, LOSS, DUAL)


@triton.jit
def _loss_epilogue(row, logp, old_ptr, adv_ptr, mask_ptr, loss_ptr, ratio_ptr, low_ptr, high_ptr, w_ptr,
                   lo, hi, dual_c, LOSS: tl.constexpr, DUAL: tl.constexpr):
    """``rlnb.algos.losses`` on scalars: 0 = pg, 1 = ppo_clip (+ dual clip), 2 = cispo.

    lo, hi: the ratio's bounds (PPO: 1 - eps_low, 1 + eps_high; CISPO: 1 - eps_low and its cap).
    """
    A = tl.load(adv_ptr + row)
    on = tl.load(mask_ptr + row)                           # 1.0 or 0.0
    ratio = tl.exp(logp - tl.load(old_ptr + row))
    if LOSS == 0:                                          # pg: -A logp, never clipped
        loss = -A * logp
        w = A
        low = ratio < 0                                    # exp() >= 0: all False
        high = low
    elif LOSS == 1:                                        # ppo_clip: max(-A rho, -A clip(rho, lo, hi))
        loss = tl.maximum(-A * ratio, -A * tl.minimum(tl.maximum(ratio, lo), hi))
        low = (ratio < lo) & (A < 0)
        high = (ratio > hi) & (A > 0)
        if DUAL:                                           # A < 0: min(that, -A c); rho > c counts as high
            loss = tl.where(A < 0, tl.minimum(loss, -A * dual_c), loss)
            high = high | ((ratio > dual_c) & (A < 0))
        w = tl.where(low | high, 0.0, A * ratio)           # the clipped branch is a constant
    else:                                                  # cispo: -sg(clip(rho, lo, hi)) A logp
        w = A * tl.minimum(tl.maximum(ratio, lo), hi)
        loss = -w * logp
        low = ratio < lo
        high = ratio > hi
    # Store: six numbers per row; masked tokens get loss 0, weight 0 and no flags.
    tl.store(loss_ptr + row, loss * on)
    tl.store(ratio_ptr + row, ratio)
    tl.store(low_ptr + row, (low & (on != 0)).to(tl.int8))
    tl.store(high_ptr + row, (high & (on != 0)).to(tl.int8))
    tl.store(w_ptr + row, w * on)


@triton.jit
def _bwd_kernel(x_ptr, dx_ptr, T_rows, stride_b, stride_t, dstride_b, dstride_t, y_ptr, V, inv_T,
                lse_ptr, H_ptr, g_ptr, h_ptr, ENTROPY: tl.constexpr, BLOCK_V: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = _row_start(x_ptr, row, T_rows, stride_b, stride_t)
    dx_row = _row_start(dx_ptr, row, T_rows, dstride_b, dstride_t)   # may be x_row itself (in place)
    cols = tl.arange(0, BLOCK_V)
    # Load: four floats and the target per row; fold 1/T and the entropy terms into two coefficients.
    y = tl.load(y_ptr + row)
    lse = tl.load(lse_ptr + row)
    g = tl.load(g_ptr + row)
    a = -g * inv_T                                         # d x_j = p_j (a + b log p_j) + [j = y] g / T
    weight = tl.abs(g)                                     # a masked token gets g = h = 0: skip its reads
    if ENTROPY:
        h = tl.load(h_ptr + row)
        a = -(g + h * tl.load(H_ptr + row)) * inv_T
        b = -h * inv_T
        weight += tl.abs(h)
    V_live = tl.where(weight > 0, V, 0)                    # columns to read: all, or none for a dead row
    for start in range(0, V, BLOCK_V):
        valid = start + cols < V
        # Load: the same block of logits again (recompute beats storing softmax: 2 B read vs 4 B write+read).
        # A dead row loads nothing (an all-false mask issues no memory traffic) and stores zeros.
        live = start + cols < V_live
        logq = tl.load(x_row + start + cols, mask=live, other=0.0).to(tl.float32) * inv_T - lse
        if ENTROPY:
            grad = tl.exp(logq) * (a + b * logq)
        else:
            grad = tl.exp(logq) * a
        grad = tl.where(start + cols == y, grad + g * inv_T, grad)
        grad = tl.where(live, grad, 0.0)
        # Store: the gradient block in the logits' dtype; in place this overwrites what we just read.
        tl.store(dx_row + start + cols, grad.to(dx_ptr.dtype.element_ty), mask=valid)


def _strides(rows: torch.Tensor):
    return rows.shape[1], rows.stride(0), rows.stride(1)


def row_forward(rows, y, *, temperature, entropy, loss_code=-1, old=None, adv=None, mask=None,
                lo=0.8, hi=1.2, dual_clip_c=None, block_v=None, num_warps=None):
    """Launch the forward kernel on (B', T', V) ``rows``; returns a dict of flat (N,) outputs."""
    n, V = y.numel(), rows.shape[-1]
    f32 = dict(dtype=torch.float32, device=rows.device)
    out = {"logp": torch.empty(n, **f32), "lse": torch.empty(n, **f32),
           "H": torch.empty(n, **f32) if entropy else None}
    if loss_code >= 0:
        out.update(loss=torch.empty(n, **f32), ratio=torch.empty(n, **f32), w=torch.empty(n, **f32),
                   low=torch.empty(n, dtype=torch.int8, device=rows.device),
                   high=torch.empty(n, dtype=torch.int8, device=rows.device))
    if n == 0:
        return out
    cfg = launch_config(n, V, rows.element_size(), block_v=block_v, num_warps=num_warps, kind="forward")
    d = out["logp"]  # stand-in pointer for arguments a variant does not use
    _fwd_kernel[cfg.grid](
        rows, *_strides(rows), y, V, 1.0 / float(temperature),
        out["logp"], out["lse"], out["H"] if entropy else d,
        old if old is not None else d, adv if adv is not None else d, mask if mask is not None else d,
        *(out.get(k, d) for k in ("loss", "ratio", "low", "high", "w")),
        float(lo), float(hi), float(dual_clip_c or 0.0),
        ENTROPY=entropy, LOSS=loss_code, DUAL=dual_clip_c is not None,
        BLOCK_V=cfg.BLOCK_V, num_warps=cfg.num_warps)
    return out


def row_backward(rows, y, lse, H, g, h, *, temperature, out=None, block_v=None, num_warps=None):
    """Launch the backward kernel: d loss / d rows into ``out`` (a fresh buffer, or ``rows`` in place)."""
    out = torch.empty(rows.shape, dtype=rows.dtype, device=rows.device) if out is None else out
    n, V = y.numel(), rows.shape[-1]
    if n == 0:
        return out
    cfg = launch_config(n, V, rows.element_size(), block_v=block_v, num_warps=num_warps, kind="backward")
    entropy = h is not None
    _bwd_kernel[cfg.grid](
        rows, out, *_strides(rows), out.stride(0), out.stride(1), y, V, 1.0 / float(temperature),
        lse, H if entropy else lse, g.contiguous(), h.contiguous() if entropy else g,
        ENTROPY=entropy, BLOCK_V=cfg.BLOCK_V, num_warps=cfg.num_warps)
    return out


class TritonTokenLoss(torch.autograd.Function):
    """Autograd around the two kernels. Saves logits (no copy), targets, lse, H and the loss weight."""

    @staticmethod
    def forward(ctx, rows, y, old, adv, mask, spec):  # rows (B', T', V); y, old, adv, mask flat (N,)
        o = row_forward(rows, y, temperature=spec.temperature, entropy=spec.entropy, loss_code=spec.loss_code,
                        old=old, adv=adv, mask=mask, lo=spec.lo, hi=spec.hi,
                        dual_clip_c=spec.dual_clip_c, block_v=spec.block_v)
        ctx.save_for_backward(rows, y, o["lse"], o["H"], o.get("w"))
        ctx.spec = spec
        ctx.set_materialize_grads(False)
        empty = o["logp"].new_empty(0)
        outs = (o["logp"], o["H"] if spec.entropy else empty, o.get("loss", empty), o.get("ratio", empty),
                o.get("low", empty).bool(), o.get("high", empty).bool(), o.get("w", empty))
        ctx.mark_non_differentiable(*outs[3:])
        return outs

    @staticmethod
    def backward(ctx, g_logp, g_H, g_loss, *_):
        rows, y, lse, H, w = ctx.saved_tensors
        spec = ctx.spec
        g = torch.zeros_like(lse) if g_logp is None else g_logp
        if g_loss is not None and w is not None:
            g = g - g_loss * w                     # d loss / d logp = -w
        h = g_H if (spec.entropy and g_H is not None) else None
        dx = row_backward(rows, y, lse, H, g, h, temperature=spec.temperature,
                          out=rows if spec.inplace else None, block_v=spec.block_v)
        return dx, None, None, None, None, None
