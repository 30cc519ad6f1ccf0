"""The lean decode: the sampling loop rlnb needs and nothing more, for decoders with plain keys and values.

``rlnb.models.generate.sample`` is the reference: it calls the model's own forward once per token, and that
forward's bookkeeping (a growing cache object, a fresh causal mask, position embeddings, output objects) adds
its own time to the arithmetic. This loop computes the same numbers with the model's own modules:

* the prompts are prefilled by the model's forward as in the reference (each distinct prompt once);
* their keys and values go into one preallocated cache per layer and each new token's keys and values are
  written in place at its column: nothing grows, nothing is concatenated (the reference's cache concatenates
  every layer's keys and values at every step);
* attention for the one new query per row is two batched matmuls over the cache, keys stored transposed
  (cheaper on a CPU than ``scaled_dot_product_attention`` at one query: see ``decode_step.Step.attend``);
* the rotary angles and the attention mask of every step are computed once, before the loop; only the last
  position's logits exist (a decode step has one position);
* finished rows leave the batch on the reference's schedule (once an eighth of the rows, or all but eight,
  are done; one copy of the written cache columns per drop), so the sampler draws for the same rows as the
  reference at every step: the same generator gives the same tokens. Keeping finished rows in the batch
  instead (no copy) costs more: on the benchmark's batch 3200 row-steps of arithmetic instead of about 2000;
* plain Llama/Qwen2/Mistral layers take ``decode_step.FusedStep``: q, k and v in one matmul, gate and up in one, each
  RMSNorm one call, q and k rotated together (about 22 kernels per layer instead of 60); others call the
  model's modules (``decode_step.Step``);
* one host sync per step (how many rows are done); the rest is tensor work;
* on a CPU, a decode whose matmuls are small runs on one thread, as the reference does (``rlnb.models.threads``:
  at the default's size a second thread's wake-ups cost more than it computes);
* on a CPU with two or more torch threads each step runs as two parts of consecutive rows on two threads, one
  intra-op thread each, and the sampler draws once for all rows from their logits (``rlnb.models.split_decode``;
  ``ForwardOptions(rows="whole")`` runs one call);
* mixed precision (``rlnb.models.precision.enable_autocast``, fp32 weights): the whole loop runs under the
  model's own autocast, so each operator computes in the dtype it has in the model's forward (matmuls bf16,
  norms and the residual stream fp32); the fused weights are cast to the half dtype once per call, not per step.

Models it cannot run exactly (another architecture, sliding windows, dropout in training mode, a cache that is
not plain keys and values, a forward replaced on the instance other than rlnb's autocast, or a hook on a module
it does not call) take the reference loop, so ``sample`` here is always safe to call.
"""

from __future__ import annotations

import contextlib

import torch

from rlnb.core import forward_options
from rlnb.models import generate, split_decode
from rlnb.models.decode_step import FusedStep, Step, fusable
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
    # read before the thread rule below lowers torch's thread count for the prefill
    parts = split_decode.parts(prompt_ids.shape[0], prompt_ids.device, forward_options.current().rows)
    with threads(decode_threads(model, prompt_ids.shape[0], prompt_ids.device)):  # the reference's thread rule
        with torch.no_grad(), precision(model, prompt_ids.device):
            state = _prefill(model, prompt_ids, prompt_mask, max_new_tokens)
        if state is None:                                                # the prefill's cache is not plain k/v
            return generate.sample(model, prompt_ids, prompt_mask, **kw)
        with torch.no_grad(), precision(model, prompt_ids.device):
            return _decode(model, state, parts=parts, **kw)


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
    ``decode_step.Step.attend``)."""

    def __init__(self, kv, logits, mask, cos, sin, Tp, half=None):
        self.kv, self.logits, self.mask, self.cos, self.sin, self.Tp = kv, logits, mask, cos, sin, Tp
        self.half = half

    def rounded(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` as the cache stores it: rounded to ``half`` under autocast (written into the fp32 cache)."""
        return x if self.half is None else x.to(self.half)

    def rows(self, lo: int, hi: int) -> _State:
        """Rows ``lo:hi`` of this state, as views (writes reach this state's cache)."""
        return _State([(K[lo:hi], V[lo:hi]) for K, V in self.kv], self.logits[lo:hi], self.mask[lo:hi],
                      self.cos[lo:hi], self.sin[lo:hi], self.Tp, self.half)

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
            generator, return_logp, parts=1):
    logits = s.logits                                                    # (b, V) for the rows still running
    B, dev = logits.shape[0], logits.device
    rows = torch.arange(B, device=dev)                                   # (b,) running row -> batch row
    done = torch.zeros(B, dtype=torch.bool, device=dev)                  # (b,) EOS sampled, row not yet dropped
    broken = torch.zeros(B, dtype=torch.bool, device=dev)                # (B,) rows whose logits went bad
    tokens = torch.full((B, max_new_tokens), pad_token_id, dtype=torch.long, device=dev)  # (B, T)
    logps = torch.zeros(B, max_new_tokens, dtype=torch.float32, device=dev) if return_logp else None
    step = (FusedStep if fusable(model) else Step)(model, s)
    if parts > 1:                                                        # row parts on parallel threads
        step = split_decode.SplitStep(step, parts, lambda: _part_context(model, dev))
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
            step.select(keep, s.Tp + t)
        logits = step(tok, t)
    if broken.any():
        bad_rows = torch.nonzero(broken).flatten()[:10].tolist()
        raise ValueError(f"logits: NaN or inf in the model's logits for rows {bad_rows} while sampling "
                         "(diverged weights? try a lower lr or max_grad_norm)")
    tokens = tokens[:, :T]
    live = _live(tokens, eos_token_id)                                   # (B, T)
    res = (tokens, live.float(), ~(live & (tokens == eos_token_id)).any(-1))
    return res + (logps[:, :T],) if return_logp else res


@contextlib.contextmanager
def _part_context(model, device):
    """What ``sample`` runs the loop under, for a part's thread (a thread starts without either)."""
    with torch.no_grad(), precision(model, device):
        yield


def _live(tokens: torch.Tensor, eos_token_id: int) -> torch.Tensor:
    """(B, T) True up to and including each row's first EOS (not ``!= pad``: a model may sample the pad id)."""
    eos = (tokens == eos_token_id).long()
    return (eos.cumsum(-1) - eos) == 0
