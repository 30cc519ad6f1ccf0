"""The lean decode's prefill, and its ``State`` from a prefill's keys and values. The prefill from the fused weights (``decode_step.Weights``), where they fold the norms (fp32).

The model's own forward computes the prompts' keys and values with its bookkeeping (a cache object, a mask built
for every call, output objects): about 10 ms for the benchmark's 16 prompts, most of it not arithmetic. This is the
same forward in about 20 operators a layer: q, k and v in one matmul, the norms' weights folded into the matmuls
after them and each residual add inside the matmul before it (rounding only, as in ``decode_step.FusedStep``),
attention by ``scaled_dot_product_attention`` with the causal and padding mask. Only the last position's logits
are computed. Tests compare keys, values and logits with the model's forward.

A left-padding position attends to itself only: its keys and values are finite and never read (the decode's
mask hides them), where a query with every key masked would give NaN.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rlnb.models.decode_step import State, Weights, addmm_residual, rotary_sign
from rlnb.models.generate import distinct_prompts


def prefill(w: Weights, ids: torch.Tensor, attn: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """(per layer (k, v), each (U, H_kv, Tp, D); the last position's logits (U, V)) for prompts ``ids`` (U, Tp),
    left-padded where ``attn`` (U, Tp) is 0, at rotary angles ``cos``/``sin`` (U, Tp, D) of their positions."""
    x, layers = run_layers(w, F.embedding(ids, w.embed), cos, sin, prompt_mask(attn, cos.dtype))
    last = x[:, -1]                                                      # (U, H)
    return layers, F.linear(F.rms_norm(last, *w.final), w.w_head, w.b_head)


def prompt_mask(attn: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The additive (U, 1, Tp, Tp) attention mask of left-padded prompts (``attn`` (U, Tp), 0 on padding): each
    query sees the earlier real keys, and itself (a padding query too: finite keys and values, never read)."""
    return additive(causal_seen(attn), dtype)


def causal_seen(attn: torch.Tensor) -> torch.Tensor:
    """(U, t, t) True where a query sees a key: the earlier real keys (``attn`` (U, t), 0 on padding), and itself."""
    eye = torch.eye(attn.shape[1], dtype=torch.bool, device=attn.device)
    return eye | (eye.cumsum(0).bool() & attn.bool()[:, None, :])


def additive(seen: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(U, 1, t, L) additive attention mask from ``seen`` (U, t, L): 0 where seen, -inf elsewhere."""
    return torch.zeros(seen.shape, dtype=dtype, device=seen.device).masked_fill_(~seen, float("-inf"))[:, None]


def run_layers(w: Weights, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor,
               prefix: list | None = None):
    """Every layer of ``w`` (folded norms) over ``x`` (U, t, H) at rotary angles ``cos``/``sin`` (U, t, D), the
    queries attending to ``prefix``'s keys and values (per layer (k, v), each (U, H_kv, Tp, D); None: none) and
    then to their own under the additive ``mask`` (U, 1, t, Tp + t): (the last layer's output (U, t, H), per
    layer the new (k, v), each (U, H_kv, t, D)). Differentiable (the update's forward, ``lean_forward``)."""
    U, t, H = x.shape
    Hq, Hkv, D = w.Hq, w.Hkv, w.D
    cos, sin = cos[:, None], (sin * rotary_sign(D, sin))[:, None]        # (U, 1, t, D)
    x = x.reshape(U * t, H)
    layers = []
    for i, (n1, w_qkv, b_qkv, o_proj, n2, w_gu, act, down) in enumerate(w.layers):
        qkv = F.linear(F.rms_norm(x, *n1), w_qkv, b_qkv).view(U, t, Hq + 2 * Hkv, D).transpose(1, 2)
        qk, v = qkv.split([Hq + Hkv, Hkv], 1)                            # (U, Hq + H_kv, t, D), (U, H_kv, t, D)
        qk = torch.addcmul(qk * cos, qk.roll(D // 2, -1), sin)           # rotary on q and k at once
        q, k = qk.split([Hq, Hkv], 1)
        layers.append((k, v))
        if prefix is not None:
            k, v = torch.cat([prefix[i][0], k], 2), torch.cat([prefix[i][1], v], 2)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=w.scale, enable_gqa=Hq != Hkv)
        x = addmm_residual(x, o.transpose(1, 2).reshape(U * t, Hq * D), *o_proj)
        g, u = F.linear(F.rms_norm(x, *n2), w_gu).chunk(2, dim=-1)
        x = addmm_residual(x, act(g) * u, *down)
    return x.view(U, t, H), layers


def shared_rows(ids: torch.Tensor, mask: torch.Tensor):
    """(which rows the prefill computes, each row's index among them): the distinct prompts where at most half the
    rows are distinct (a group's prompt once), else every row."""
    first, inv = distinct_prompts(ids, mask)                             # (U,), (B,)
    if 2 * len(first) <= ids.shape[0]:
        return first, inv
    every = torch.arange(ids.shape[0], device=ids.device)
    return every, every


def prefill_parts(w: Weights, ids: torch.Tensor, attn: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                  cuts: list[int], run=None):
    """``prefill`` of B rows as the decode's row parts (rows ``cuts[i]:cuts[i + 1]``), each part's prompts once
    (``shared_rows``) and on its own (``run(fn, items)`` runs them, as ``row_split.run`` on parallel threads; default
    in turn): (per layer (k, v) of the computed rows, each row's first logits (B, V), each row's index among the
    computed rows (B,)). Each part computes exactly what it would alone, so a part played by the decode worker
    (``rlnb.models.decode_worker``) gets the numbers a thread gets."""
    def one(lo_hi):
        lo, hi = lo_hi
        sel, rows = shared_rows(ids[lo:hi], attn[lo:hi])
        with torch.no_grad():                                            # a pool thread starts with gradients on
            kv, logits = prefill(w, ids[lo:hi][sel], attn[lo:hi][sel], cos[lo:hi][sel], sin[lo:hi][sel])
        return kv, logits[rows], rows

    outs = (run or (lambda fn, items: [fn(x) for x in items]))(one, list(zip(cuts, cuts[1:])))
    offsets = [0]
    for kv, _, _ in outs:
        offsets.append(offsets[-1] + kv[0][0].shape[0])
    layers = [(torch.cat([o[0][i][0] for o in outs]), torch.cat([o[0][i][1] for o in outs]))
              for i in range(len(outs[0][0]))]
    rows = torch.cat([r + off for (_, _, r), off in zip(outs, offsets)])
    return layers, torch.cat([o[1] for o in outs]), rows


def state(layers, logits: torch.Tensor, rows: torch.Tensor, mask: torch.Tensor, cos: torch.Tensor,
          sin: torch.Tensor, T: int, half) -> State:
    """The decode's ``State`` for B rows from the prefill's ``layers`` (per layer (k, v) of the computed rows, each
    (U, H_kv, Tp, D)) and first ``logits`` (B, V): row b's cache starts with computed row ``rows[b]``'s keys and
    values, with room for T tokens; ``mask`` (B, Tp) the prompts' padding, ``cos``/``sin`` (B, T, D) the rotary
    angles of the decoded positions."""
    B, Tp = mask.shape
    kv, s = [], State(None, None, None, None, None, Tp, half)
    for k, v in layers:                                                  # (U, H_kv, Tp, D)
        dtype = (k.dtype, v.dtype) if half is None else (torch.float32, torch.float32)
        K = k.new_empty((B, k.shape[1], k.shape[-1], Tp + T), dtype=dtype[0])  # (B, H_kv, D, Tp + T): see State
        V = v.new_empty((B, v.shape[1], Tp + T, v.shape[-1]), dtype=dtype[1])  # (B, H_kv, Tp + T, D)
        K[..., :Tp], V[:, :, :Tp] = s.rounded(k[rows].transpose(-1, -2)), s.rounded(v[rows])
        kv.append((K, V))
    keep = torch.cat([mask.bool(), mask.new_ones(B, T, dtype=torch.bool)], dim=1)  # (B, Tp + T)
    add = torch.zeros(keep.shape, dtype=kv[0][0].dtype, device=keep.device).masked_fill(~keep, float("-inf"))
    s.kv, s.logits, s.mask, s.cos, s.sin = kv, logits, add[:, None, None], cos, sin
    return s


def decode_angles(model, prompt_ids: torch.Tensor, pos: torch.Tensor, T: int, dtype) -> tuple:
    """The rotary angles (B, T, D) of the positions the decoded tokens take after prompts at positions ``pos``."""
    dec = model.get_decoder()
    steps = pos[:, -1:] + 1 + torch.arange(T, device=pos.device)        # (B, T) positions of the fed tokens
    x = dec.embed_tokens(prompt_ids[:, :1])                              # dtype/device probe for the angles
    return dec.rotary_emb(x.to(dtype), position_ids=steps)               # (B, T, D) each
