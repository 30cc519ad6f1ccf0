"""One step of the lean decode (``rlnb.models.lean_decode``): the token sampled at step t goes in at column
Tp + t of every layer's cache, (b, V) logits come out. ``Step`` calls the model's own modules; ``FusedStep``
computes the same in fewer operators from plain tensors (``Weights``) where the layers are plain (``fusable``)."""

from __future__ import annotations

import contextlib
import copy
import sys
from typing import NamedTuple

import torch
import torch.nn.functional as F


class State:
    """What a step reads and writes: the cache (per layer keys (b, H_kv, D, Tp + T), stored transposed so that
    q K^T is one batched matmul over contiguous rows, and values (b, H_kv, Tp + T, D)), the first logits,
    the additive attention mask of every step (b, 1, 1, Tp + T) and the rotary angles (b, T, D) of every
    decoded position. ``half``: the autocast dtype the loop runs under (None: none); then the cache is fp32 holding
    keys and values rounded to ``half``, what ``scaled_dot_product_attention`` reads under autocast (see
    ``Step.attend``)."""

    def __init__(self, kv, logits, mask, cos, sin, Tp, half=None):
        self.kv, self.logits, self.mask, self.cos, self.sin, self.Tp = kv, logits, mask, cos, sin, Tp
        self.half = half

    def rounded(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` as the cache stores it: rounded to ``half`` under autocast (written into the fp32 cache)."""
        return x if self.half is None else x.to(self.half)

    def rows(self, lo: int, hi: int) -> State:
        """Rows ``lo:hi`` of this state, as views (writes reach this state's cache)."""
        return State([(K[lo:hi], V[lo:hi]) for K, V in self.kv], self.logits[lo:hi], self.mask[lo:hi],
                     self.cos[lo:hi], self.sin[lo:hi], self.Tp, self.half)

    def select(self, keep: torch.Tensor, cols: int) -> None:
        """Keep the rows ``keep`` (sorted) only, moved up in place: the cache's first ``cols`` columns, the ones
        written so far, go to its first rows (a new cache per drop cost more: its fresh pages)."""
        n, kv = len(keep), []
        for K, V in self.kv:
            K[:n, ..., :cols], V[:n, :, :cols] = K[keep, ..., :cols], V[keep, :, :cols]  # gathered first, then moved
            kv.append((K[:n], V[:n]))
        self.kv, self.mask, self.cos, self.sin = kv, self.mask[keep], self.cos[keep], self.sin[keep]


class Step:
    """One decode step of every row: the token sampled at step t goes in at column Tp + t; (B, V) logits out."""

    def __init__(self, model, s):
        dec = model.get_decoder()
        self.embed, self.norm, self.head = dec.embed_tokens, dec.norm, model.get_output_embeddings()
        self.layers = list(dec.layers)
        attn = self.layers[0].self_attn
        self.rope = sys.modules[type(attn).__module__].apply_rotary_pos_emb  # the family's own rotation
        self.s = s
        V = s.kv[0][1]
        self.Hkv, self.D = V.shape[1], V.shape[-1]
        self.Hq = attn.q_proj.out_features // self.D
        self.scale = getattr(attn, "scaling", self.D ** -0.5)

    def part(self, s: State) -> Step:
        """The same step over another state (a part's rows)."""
        other = copy.copy(self)
        other.s = s
        return other

    def select(self, keep: torch.Tensor, cols: int) -> None:
        self.s.select(keep, cols)

    def __call__(self, tok: torch.Tensor, t: int) -> torch.Tensor:
        s, B, D = self.s, tok.shape[0], self.D
        col = s.Tp + t                                                   # this token's cache column
        cos, sin = s.cos[:, t:t + 1], s.sin[:, t:t + 1]                  # (B, 1, D)
        mask = s.mask[..., :col + 1]                                     # (B, 1, 1, col + 1)
        x = self.embed(tok[:, None])                                     # (B, 1, H)
        for layer, (K, V) in zip(self.layers, s.kv):
            a = layer.self_attn
            h = layer.input_layernorm(x)
            q = a.q_proj(h).view(B, 1, self.Hq, D)
            k = a.k_proj(h).view(B, 1, self.Hkv, D)
            if hasattr(a, "q_norm"):                                     # Qwen3: per-head RMSNorm before rotary
                q, k = a.q_norm(q), a.k_norm(k)
            q, k = self.rope(q.transpose(1, 2), k.transpose(1, 2), cos, sin)  # (B, H, 1, D)
            K[..., col] = s.rounded(k[:, :, 0])
            V[:, :, col:col + 1] = a.v_proj(h).view(B, 1, self.Hkv, D).transpose(1, 2)
            o = self.attend(q, K[..., :col + 1], V[:, :, :col + 1], mask)  # (B, Hq, 1, D)
            x = x + a.o_proj(o.transpose(1, 2).reshape(B, 1, self.Hq * D))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return self.head(self.norm(x[:, 0]))                             # (B, V)

    def attend(self, q, K, V, mask):
        """softmax(q K^T * scale + mask) V for one query per row, as two batched matmuls: on a CPU several times
        cheaper than ``scaled_dot_product_attention``'s kernel at one query (measured: 170 vs 250 us at one
        thread, 430 vs 1960 us of CPU at two). A group of query heads shares each key head (GQA) through a
        reshape, not a copy. q (B, Hq, 1, D); K (B, H_kv, D, L) and V (B, H_kv, L, D) views of the cache;
        mask (B, 1, 1, L) additive.

        Under autocast the model's forward runs ``scaled_dot_product_attention`` on q, k and v rounded to the half
        dtype, accumulating in fp32; this does the same (the cache holds rounded values, q is rounded here, the
        matmuls run in fp32 outside autocast). Rounding the scores to bf16 instead (autocast's matmul) moved the
        log-probs 3x further from the model's forward."""
        B, g = q.shape[0], self.Hq // self.Hkv
        off = contextlib.nullcontext() if self.s.half is None else torch.autocast(q.device.type, enabled=False)
        with off:
            q = q if self.s.half is None else q.to(self.s.half).to(K.dtype)
            w = torch.matmul(q.reshape(B, self.Hkv, g, self.D), K).mul_(self.scale).add_(mask)  # (B, H_kv, g, L)
            w = w.softmax(-1, dtype=torch.float32).to(V.dtype)
            return torch.matmul(w, V).reshape(B, self.Hq, 1, self.D)


def fusable(model) -> bool:
    """True when every layer's projections are plain ``nn.Linear`` and its norms plain RMSNorms, none hooked,
    and no per-head q/k norms (Qwen3): then ``FusedStep`` may read their weights directly."""
    for layer in model.get_decoder().layers:
        a, mlp = layer.self_attn, layer.mlp
        linears = [a.q_proj, a.k_proj, a.v_proj, a.o_proj, mlp.gate_proj, mlp.up_proj, mlp.down_proj]
        norms = [layer.input_layernorm, layer.post_attention_layernorm]
        if hasattr(a, "q_norm") or mlp.gate_proj.bias is not None or mlp.up_proj.bias is not None:
            return False
        if any(type(m) is not torch.nn.Linear for m in linears):
            return False
        if any(not type(n).__name__.endswith("RMSNorm") or not hasattr(n, "variance_epsilon") for n in norms):
            return False
        if any(m._forward_hooks or m._forward_pre_hooks or "forward" in vars(m) for m in [mlp, *linears, *norms]):
            return False
    dec, head = model.get_decoder(), model.get_output_embeddings()       # read directly too (no module call)
    ends = [dec.embed_tokens, dec.norm, head]
    if type(head) is not torch.nn.Linear or type(dec.embed_tokens) is not torch.nn.Embedding \
            or not type(dec.norm).__name__.endswith("RMSNorm") or not hasattr(dec.norm, "variance_epsilon"):
        return False
    return not any(m._forward_hooks or m._forward_pre_hooks or "forward" in vars(m) for m in ends)


class Weights(NamedTuple):
    """The plain tensors ``FusedStep`` reads, built from the model by ``weights``. ``layers``: per layer
    (norm1, W_qkv, b_qkv, (W_o^T, W_o, b_o), norm2, W_gate_up, act, (W_down^T, W_down, b_down)), each norm
    ``F.rms_norm``'s (shape, weight, eps); ``fold``: each norm's weight is folded into the matmul after it."""
    embed: torch.Tensor
    layers: list
    final: tuple
    w_head: torch.Tensor
    b_head: torch.Tensor | None
    Hq: int
    Hkv: int
    D: int
    scale: float
    fold: bool


def weights(model, half: torch.dtype | None) -> Weights:
    """The tensors of a plain decoder (``fusable``) as ``FusedStep`` reads them: q, k and v concatenated, gate and
    up concatenated; under autocast (``half``) cast to its dtype once here (autocast would cast the concatenated
    ones every step: it caches only leaf weights); in fp32 each RMSNorm's weight folded into the matmul after it
    (the same products in another order: rounding only; under autocast the model rounds the norm's output to the
    half dtype first, so there it stays separate)."""
    dec, head = model.get_decoder(), model.get_output_embeddings()
    fold = half is None and head.weight.dtype == torch.float32
    cast = lambda w: w if w is None or half is None else w.to(half)  # noqa: E731
    layers = []
    for layer in dec.layers:
        a, mlp = layer.self_attn, layer.mlp
        n1, n2 = layer.input_layernorm, layer.post_attention_layernorm
        b = [a.q_proj.bias, a.k_proj.bias, a.v_proj.bias]
        w_qkv = torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight])  # (out, H)
        w_gu = torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight])
        layers.append((
            _norm(n1, fold), cast(w_qkv * n1.weight if fold else w_qkv), None if b[0] is None else cast(torch.cat(b)),
            _out(a.o_proj, cast), _norm(n2, fold), cast(w_gu * n2.weight if fold else w_gu), mlp.act_fn,
            _out(mlp.down_proj, cast)))
    attn = dec.layers[0].self_attn
    D = _head_dim(attn)
    Hq, Hkv = attn.q_proj.out_features // D, attn.k_proj.out_features // D
    w_head = head.weight * dec.norm.weight if fold else head.weight
    return Weights(dec.embed_tokens.weight, layers, _norm(dec.norm, fold), w_head, head.bias, Hq, Hkv, D,
                   float(getattr(attn, "scaling", D ** -0.5)), fold)


def _head_dim(attn) -> int:
    return getattr(attn, "head_dim", None) or attn.config.hidden_size // attn.config.num_attention_heads


class FusedStep:
    """The step in fewer operators, for plain layers (``fusable``), from ``Weights``: q, k and v in one matmul,
    gate and up in one, each RMSNorm one ``rms_norm`` call, q and k rotated together (rotate-half rotary, the
    convention of every family in FAMILIES), the attention's scale and mask inside its first batched matmul, and
    in fp32 each residual add inside the matmul before it (``addmm``: rounding only; under autocast the model
    rounds the projection's output to the half dtype before the add, so there they stay separate). A decode step
    is a few hundred operators this small, so each one removed pays."""

    def __init__(self, w: Weights, s: State):
        self.w, self.s = w, s
        self.Hq, self.Hkv, self.D, self.scale = w.Hq, w.Hkv, w.D, w.scale
        self.residual = addmm_residual if w.fold else _add_linear
        self.sign = rotary_sign(self.D, s.sin)                           # (D,)
        self._views()

    def _views(self) -> None:
        """Each layer's cache as batched-matmul operands, (b H_kv, D, L) keys and (b H_kv, L, D) values, the
        mask as (b H_kv, 1, L) and the signed sines of every step: views and small copies, made again whenever
        rows leave."""
        s, Hkv = self.s, self.Hkv
        B, L = s.mask.shape[0], s.mask.shape[-1]
        self.sin = s.sin * self.sign                                     # (b, T, D)
        self.kv3 = [(K.view(B * Hkv, self.D, L), V.view(B * Hkv, L, self.D)) for K, V in s.kv]
        self.mask3 = s.mask.expand(B, Hkv, 1, L).reshape(B * Hkv, 1, L)

    def part(self, s: State) -> FusedStep:
        """The same step over another state (a part's rows), sharing the weights."""
        return FusedStep(self.w, s)

    def select(self, keep: torch.Tensor, cols: int) -> None:
        self.s.select(keep, cols)
        self._views()

    def __call__(self, tok: torch.Tensor, t: int) -> torch.Tensor:
        s, w, B, D, Hq, Hkv = self.s, self.w, tok.shape[0], self.D, self.Hq, self.Hkv
        col = s.Tp + t
        cos, sin = s.cos[:, t:t + 1], self.sin[:, t:t + 1]               # (B, 1, D)
        mask = self.mask3[..., :col + 1]                                 # (B H_kv, 1, col + 1)
        x = F.embedding(tok, w.embed)                                    # (B, H)
        for (n1, w_qkv, b_qkv, o_proj, n2, w_gu, act, down), (K, V), (K3, V3) in zip(w.layers, s.kv, self.kv3):
            qkv = F.linear(F.rms_norm(x, *n1), w_qkv, b_qkv).view(B, Hq + 2 * Hkv, D)
            qk, v = qkv.split([Hq + Hkv, Hkv], 1)
            qk = torch.addcmul(qk * cos, qk.roll(D // 2, -1), sin)       # rotary on q and k at once
            q, k = qk.split([Hq, Hkv], 1)                                # (B, Hq, D), (B, H_kv, D)
            K[..., col] = s.rounded(k)
            V[:, :, col] = v
            o = self.attend(q, K3[..., :col + 1], V3[:, :col + 1], mask)  # (B H_kv, g, D)
            x = self.residual(x, o.view(B, Hq * D), *o_proj)
            g, u = F.linear(F.rms_norm(x, *n2), w_gu).chunk(2, dim=-1)
            x = self.residual(x, act(g).mul_(u), *down)
        return F.linear(F.rms_norm(x, *w.final), w.w_head, w.b_head)    # (B, V)

    def attend(self, q, K, V, mask):
        """``Step.attend`` on (b H_kv, ...) operands: softmax(q K^T * scale + mask) V, the scale and mask inside
        the first batched matmul (one operator instead of three)."""
        B, g = q.shape[0], self.Hq // self.Hkv
        off = contextlib.nullcontext() if self.s.half is None else torch.autocast(q.device.type, enabled=False)
        with off:
            q = q if self.s.half is None else q.to(self.s.half).to(K.dtype)
            w = torch.baddbmm(mask, q.reshape(B * self.Hkv, g, self.D), K, alpha=self.scale)  # (B H_kv, g, L)
            return torch.bmm(w.softmax(-1, dtype=torch.float32).to(V.dtype), V)


def _norm(n, fold: bool = False) -> tuple:
    """``F.rms_norm``'s (normalized_shape, weight, eps) for an RMSNorm module; no weight where it is folded into
    the matmul after it."""
    return (tuple(n.weight.shape), None if fold else n.weight, n.variance_epsilon)


def _out(linear, cast) -> tuple:
    """An output projection as (W^T, W, bias), cast for autocast: ``addmm`` reads W^T, ``F.linear`` W."""
    w = cast(linear.weight)
    return (w.t(), w, cast(linear.bias))


def rotary_sign(D: int, like: torch.Tensor) -> torch.Tensor:
    """(D,) signs that make ``x.roll(D // 2, -1) * sign`` rotate-half(x): -1 on the first half, +1 on the second."""
    half = D // 2
    return torch.cat([-torch.ones(half), torch.ones(D - half)]).to(like)


def addmm_residual(x, a, w_t, w, b):
    """x + a W^T (+ b) in one matmul (fp32)."""
    y = torch.addmm(x, a, w_t)
    return y if b is None else y.add_(b)


def _add_linear(x, a, w_t, w, b):
    """x + (a W^T + b) as the model adds them (under autocast the product is rounded to the half dtype first)."""
    return x + F.linear(a, w, b)
