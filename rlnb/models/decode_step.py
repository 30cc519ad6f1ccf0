"""One step of the lean decode (``rlnb.models.lean_decode``): the token sampled at step t goes in at column
Tp + t of every layer's cache, (b, V) logits come out. ``Step`` calls the model's own modules; ``FusedStep``
computes the same in fewer kernels where the layers are plain (``fusable``)."""

from __future__ import annotations

import contextlib
import sys

import torch
import torch.nn.functional as F


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
    return True


class FusedStep(Step):
    """The same step in fewer kernels (about 22 per layer instead of 60: at a few rows a step costs what its
    kernel launches cost): q, k and v in one matmul, gate and up in one, each RMSNorm one ``rms_norm`` call, q
    and k rotated together (rotate-half rotary, the convention of every family in FAMILIES). Under autocast the
    projections' weights are cast to its dtype here, once (autocast would cast the concatenated ones every step:
    it caches only leaf weights); the same rounding autocast applies, so the numbers do not change."""

    def __init__(self, model, s):
        super().__init__(model, s)
        dev = s.kv[0][0].device.type
        half = torch.get_autocast_dtype(dev) if torch.is_autocast_enabled(dev) else None
        cast = lambda w: w if w is None or half is None else w.to(half)  # noqa: E731
        self.fused = []
        for layer in self.layers:
            a, mlp = layer.self_attn, layer.mlp
            b = [a.q_proj.bias, a.k_proj.bias, a.v_proj.bias]
            self.fused.append((
                _norm(layer.input_layernorm), cast(torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight])),
                None if b[0] is None else cast(torch.cat(b)), (cast(a.o_proj.weight), cast(a.o_proj.bias)),
                _norm(layer.post_attention_layernorm), cast(torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight])),
                mlp.act_fn, (cast(mlp.down_proj.weight), cast(mlp.down_proj.bias))))
        half = self.D // 2                                               # rotate_half(x) = roll(x, D/2) * (-1 | +1)
        self.sign = torch.cat([-torch.ones(half), torch.ones(self.D - half)]).to(s.sin)  # (D,)
        self.final = _norm(self.norm)

    def __call__(self, tok: torch.Tensor, t: int) -> torch.Tensor:
        s, B, D, Hq, Hkv = self.s, tok.shape[0], self.D, self.Hq, self.Hkv
        col = s.Tp + t
        cos, sin = s.cos[:, t:t + 1], s.sin[:, t:t + 1] * self.sign      # (B, 1, D)
        mask = s.mask[..., :col + 1]                                     # (B, 1, 1, col + 1)
        x = self.embed(tok)                                              # (B, H)
        for (n1, w_qkv, b_qkv, o_proj, n2, w_gu, act, down), (K, V) in zip(self.fused, s.kv):
            qkv = F.linear(F.rms_norm(x, *n1), w_qkv, b_qkv).view(B, Hq + 2 * Hkv, D)
            qk = qkv[:, :Hq + Hkv]                                       # (B, Hq + H_kv, D)
            qk = qk * cos + qk.roll(D // 2, -1) * sin                    # rotary on q and k at once
            K[..., col] = s.rounded(qk[:, Hq:])
            V[:, :, col] = qkv[:, Hq + Hkv:]
            o = self.attend(qk[:, :Hq, None], K[..., :col + 1], V[:, :, :col + 1], mask)  # (B, Hq, 1, D)
            x = x + F.linear(o.reshape(B, Hq * D), *o_proj)
            g, u = F.linear(F.rms_norm(x, *n2), w_gu).chunk(2, dim=-1)
            x = x + F.linear(act(g) * u, *down)
        return self.head(F.rms_norm(x, *self.final))                     # (B, V)


def _norm(n) -> tuple:
    """``F.rms_norm``'s (normalized_shape, weight, eps) for an RMSNorm module."""
    return (n.weight.shape, n.weight, n.variance_epsilon)
