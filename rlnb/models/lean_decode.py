"""The lean decode: the sampling loop rlnb needs and nothing more, for decoders with plain keys and values.

``rlnb.models.generate.sample`` is the reference: it calls the model's own forward once per token, and that
forward's bookkeeping (a growing cache object, a fresh causal mask, position embeddings, output objects) adds
its own time to the arithmetic. This loop computes the same numbers with the model's own modules:

* the prompts are prefilled by the model's forward as in the reference (each distinct prompt once);
* their keys and values go into one preallocated cache per layer and each new token's keys and values are
  written in place at its column: nothing grows, nothing is concatenated (the reference's cache concatenates
  every layer's keys and values at every step);
* attention for the one new query per row is two batched matmuls over the cache, keys stored transposed
  (cheaper on a CPU than ``scaled_dot_product_attention`` at one query: see ``_Step.attend``);
* the rotary angles and the attention mask of every step are computed once, before the loop; only the last
  position's logits exist (a decode step has one position);
* finished rows leave the batch on the reference's schedule (once an eighth of the rows, or all but eight,
  are done; one copy of the written cache columns per drop), so the sampler draws for the same rows as the
  reference at every step: the same generator gives the same tokens. Keeping finished rows in the batch
  instead (no copy) costs more: on the benchmark's batch 3200 row-steps of arithmetic instead of about 2000;
* plain Llama/Qwen2/Mistral layers take ``_FusedStep``: q, k and v in one matmul, gate and up in one, each
  RMSNorm one call, q and k rotated together (about 22 kernels per layer instead of 60); others call the
  model's modules (``_Step``);
* one host sync per step (how many rows are done); the rest is tensor work;
* on a CPU, a decode whose matmuls are small runs on one thread, as the reference does (``rlnb.models.threads``:
  at the default's size a second thread's wake-ups cost more than it computes);
* mixed precision (``rlnb.models.precision.enable_autocast``, fp32 weights): the whole loop runs under the
  model's own autocast, so each operator computes in the dtype it has in the model's forward (matmuls bf16,
  norms and the residual stream fp32); the fused weights are cast to the half dtype once per call, not per step.

Models it cannot run exactly (another architecture, sliding windows, dropout in training mode, a cache that is
not plain keys and values, a forward replaced on the instance other than rlnb's autocast, or a hook on a module
it does not call) take the reference loop, so ``sample`` here is always safe to call.
"""

from __future__ import annotations

import contextlib
import sys

import torch
import torch.nn.functional as F

from rlnb.models import generate
from rlnb.models.generate import cache_of, check_sample_args, distinct_prompts, next_token, position_ids
from rlnb.models.precision import autocast_dtype
from rlnb.models.shared_prompt import plain_kv
from rlnb.models.threads import decode_threads, threads

# families whose decoder layer is exactly: x += attn(norm(x)); x += mlp(norm(x)), attention = rotary q/k
# (optionally RMS-normed per head, Qwen3) over all earlier keys
FAMILIES = ("llama", "qwen2", "qwen3", "mistral")


def supported(model) -> bool:
    """True when the lean loop computes what ``model``'s own forward computes (see the module doc)."""
    if getattr(model, "training", False) or type(model).__name__.startswith("Peft"):
        return False                                                     # dropout; a wrapper's own forward
    cfg = getattr(model, "config", None)
    if getattr(cfg, "model_type", None) not in FAMILIES or getattr(cfg, "pretraining_tp", 1) != 1:
        return False
    if getattr(cfg, "sliding_window", None) is not None and getattr(cfg, "use_sliding_window", True):
        return False
    if any(kind != "full_attention" for kind in getattr(cfg, "layer_types", None) or ()):
        return False
    dec = model.get_decoder() if hasattr(model, "get_decoder") else None
    need = ("embed_tokens", "layers", "norm", "rotary_emb")
    if dec is None or not all(hasattr(dec, n) for n in need) or model.get_output_embeddings() is None:
        return False
    # a forward replaced on the instance or a hook on a module this loop does not call (it calls the projections,
    # norms and MLPs, not the model, the decoder, its layers or their attention); rlnb's autocast wrapper on the
    # model and its decoder is the exception: the loop runs under the same autocast (``precision``)
    skipped = [model, dec, *dec.layers, *(layer.self_attn for layer in dec.layers)]
    replaced = skipped[2:] if autocast_dtype(model) is not None else skipped
    return not any("forward" in vars(m) for m in replaced) and not any(
        m._forward_hooks or m._forward_pre_hooks for m in skipped)


def sample(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, *, max_new_tokens: int,
           eos_token_id: int, pad_token_id: int, temperature: float = 1.0, top_p: float = 1.0,
           greedy: bool = False, generator: torch.Generator | None = None, return_logp: bool = False):
    """``rlnb.models.generate.sample``'s contract (same arguments, same outputs, same errors), through the lean
    loop where ``supported(model)``, else through the reference."""
    kw = dict(max_new_tokens=max_new_tokens, eos_token_id=eos_token_id, pad_token_id=pad_token_id,
              temperature=temperature, top_p=top_p, greedy=greedy, generator=generator, return_logp=return_logp)
    if not supported(model):
        return generate.sample(model, prompt_ids, prompt_mask, **kw)
    check_sample_args(model, prompt_ids, prompt_mask, temperature=temperature, max_new_tokens=max_new_tokens)
    with threads(decode_threads(model, prompt_ids.shape[0], prompt_ids.device)):  # the reference's thread rule
        with torch.no_grad(), precision(model, prompt_ids.device):
            state = _prefill(model, prompt_ids, prompt_mask, max_new_tokens)
        if state is None:                                                # the prefill's cache is not plain k/v
            return generate.sample(model, prompt_ids, prompt_mask, **kw)
        with torch.no_grad(), precision(model, prompt_ids.device):
            return _decode(model, state, **kw)


def precision(model, device: torch.device):
    """The model's own autocast (rlnb's mixed-precision option) around the loop, else nothing: the loop calls the
    model's parts, not its wrapped forward, so it enters the same autocast itself."""
    dtype = autocast_dtype(model)
    return contextlib.nullcontext() if dtype is None else torch.autocast(device.type, dtype=dtype)


class _State:
    """What the loop reads: the cache (per layer keys (b, H_kv, D, Tp + T), stored transposed so that q K^T is
    one batched matmul over contiguous rows, and values (b, H_kv, Tp + T, D)), the first logits,
    the additive attention mask of every step (b, 1, 1, Tp + T) and the rotary angles (b, T, D) of every
    decoded position. ``half``: the autocast dtype the loop runs under (None: none); then the cache is fp32 holding
    keys and values rounded to ``half``, what ``scaled_dot_product_attention`` reads under autocast (see
    ``_Step.attend``)."""

    def __init__(self, kv, logits, mask, cos, sin, Tp, half=None):
        self.kv, self.logits, self.mask, self.cos, self.sin, self.Tp = kv, logits, mask, cos, sin, Tp
        self.half = half

    def rounded(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` as the cache stores it: rounded to ``half`` under autocast (written into the fp32 cache)."""
        return x if self.half is None else x.to(self.half)

    def select(self, keep: torch.Tensor, cols: int) -> None:
        """Keep the rows ``keep`` only; the cache's first ``cols`` columns are the ones written so far."""
        kv = []
        for K, V in self.kv:
            K2, V2 = K.new_empty((len(keep),) + K.shape[1:]), V.new_empty((len(keep),) + V.shape[1:])
            K2[..., :cols], V2[:, :, :cols] = K[keep, ..., :cols], V[keep, :, :cols]
            kv.append((K2, V2))
        self.kv, self.mask, self.cos, self.sin = kv, self.mask[keep], self.cos[keep], self.sin[keep]


def _prefill(model, prompt_ids, prompt_mask, T: int) -> _State | None:
    B, Tp = prompt_ids.shape
    attn = prompt_mask.long()
    pos = position_ids(attn)                                             # (B, Tp)
    first, inv = distinct_prompts(prompt_ids, prompt_mask)               # (U,), (B,)
    share = 2 * len(first) <= B
    sel = first if share else slice(None)
    out = model(input_ids=prompt_ids[sel], attention_mask=attn[sel], position_ids=pos[sel], use_cache=True,
                logits_to_keep=1)
    layers = plain_kv(cache_of(out))
    if layers is None or any(k.shape[-2] != Tp for k, _ in layers):
        return None
    rows = inv if share else torch.arange(B, device=prompt_ids.device)
    dev = prompt_ids.device.type
    half = torch.get_autocast_dtype(dev) if torch.is_autocast_enabled(dev) else None
    kv, s = [], _State(None, None, None, None, None, Tp, half)
    for k, v in layers:                                                  # (U or B, H_kv, Tp, D)
        dtype = (k.dtype, v.dtype) if half is None else (torch.float32, torch.float32)
        K = k.new_empty((B, k.shape[1], k.shape[-1], Tp + T), dtype=dtype[0])  # (B, H_kv, D, Tp + T): see _State
        V = v.new_empty((B, v.shape[1], Tp + T, v.shape[-1]), dtype=dtype[1])  # (B, H_kv, Tp + T, D)
        K[..., :Tp], V[:, :, :Tp] = s.rounded(k[rows].transpose(-1, -2)), s.rounded(v[rows])
        kv.append((K, V))
    keep = torch.cat([prompt_mask.bool(), prompt_mask.new_ones(B, T, dtype=torch.bool)], dim=1)  # (B, Tp + T)
    mask = torch.zeros(keep.shape, dtype=kv[0][0].dtype, device=keep.device).masked_fill(~keep, float("-inf"))
    dec = model.get_decoder()
    steps = pos[:, -1:] + 1 + torch.arange(T, device=pos.device)        # (B, T) positions of the fed tokens
    x = dec.embed_tokens(prompt_ids[:, :1])                              # dtype/device probe for the angles
    cos, sin = dec.rotary_emb(x.to(kv[0][0].dtype), position_ids=steps)  # (B, T, D) each
    s.kv, s.logits, s.mask, s.cos, s.sin = kv, out.logits[:, -1][rows], mask[:, None, None], cos, sin
    return s                                                             # first logits (B, V)


def _decode(model, s: _State, *, max_new_tokens, eos_token_id, pad_token_id, temperature, top_p, greedy,
            generator, return_logp):
    logits = s.logits                                                    # (b, V) for the rows still running
    B, dev = logits.shape[0], logits.device
    rows = torch.arange(B, device=dev)                                   # (b,) running row -> batch row
    done = torch.zeros(B, dtype=torch.bool, device=dev)                  # (b,) EOS sampled, row not yet dropped
    broken = torch.zeros(B, dtype=torch.bool, device=dev)                # (B,) rows whose logits went bad
    tokens = torch.full((B, max_new_tokens), pad_token_id, dtype=torch.long, device=dev)  # (B, T)
    logps = torch.zeros(B, max_new_tokens, dtype=torch.float32, device=dev) if return_logp else None
    step = (_FusedStep if fusable(model) else _Step)(model, s)
    T = max_new_tokens
    for t in range(max_new_tokens):
        bad = ~torch.isfinite(logits.amax(-1))                           # (b,) NaN, +inf, or nothing finite
        broken[rows] |= bad & ~done
        logits = logits.masked_fill(bad[:, None], 0.0)                   # keep sampling; we raise below
        tok = next_token(logits, temperature=temperature, top_p=top_p, greedy=greedy, generator=generator)
        tokens[rows, t] = tok.masked_fill(done, pad_token_id)
        if return_logp:
            lp = torch.log_softmax(logits.float() / temperature, dim=-1).gather(-1, tok[:, None])[:, 0]
            logps[rows, t] = lp.masked_fill(done, 0.0)
        done = done | (tok == eos_token_id)
        n_done = int(done.sum())                                         # the one host sync of a step
        if n_done == len(rows) or t == max_new_tokens - 1:
            T = t + 1
            break
        # finished rows leave in batches, on the reference's schedule: the sampler then draws for the same rows
        # as the reference at every step (same tokens for the same generator); one cache copy per drop
        if n_done and (n_done * 8 >= len(rows) or len(rows) - n_done <= 8):
            keep = torch.nonzero(~done).flatten()
            rows, tok, done = rows[keep], tok[keep], done[keep]
            s.select(keep, s.Tp + t)
        logits = step(tok, t)
    if broken.any():
        bad_rows = torch.nonzero(broken).flatten()[:10].tolist()
        raise ValueError(f"logits: NaN or inf in the model's logits for rows {bad_rows} while sampling "
                         "(diverged weights? try a lower lr or max_grad_norm)")
    tokens = tokens[:, :T]
    live = _live(tokens, eos_token_id)                                   # (B, T)
    res = (tokens, live.float(), ~(live & (tokens == eos_token_id)).any(-1))
    return res + (logps[:, :T],) if return_logp else res


def _live(tokens: torch.Tensor, eos_token_id: int) -> torch.Tensor:
    """(B, T) True up to and including each row's first EOS (not ``!= pad``: a model may sample the pad id)."""
    eos = (tokens == eos_token_id).long()
    return (eos.cumsum(-1) - eos) == 0


class _Step:
    """One decode step of every row: the token sampled at step t goes in at column Tp + t; (B, V) logits out."""

    def __init__(self, model, s: _State):
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
    and no per-head q/k norms (Qwen3): then ``_FusedStep`` may read their weights directly."""
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


class _FusedStep(_Step):
    """The same step in fewer kernels (about 22 per layer instead of 60: at a few rows a step costs what its
    kernel launches cost): q, k and v in one matmul, gate and up in one, each RMSNorm one ``rms_norm`` call, q
    and k rotated together (rotate-half rotary, the convention of every family in FAMILIES). Under autocast the
    projections' weights are cast to its dtype here, once (autocast would cast the concatenated ones every step:
    it caches only leaf weights); the same rounding autocast applies, so the numbers do not change."""

    def __init__(self, model, s: _State):
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
