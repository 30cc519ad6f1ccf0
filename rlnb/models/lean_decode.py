"""The lean decode: the sampling loop rlnb needs and nothing more, for decoders with plain keys and values.

``rlnb.models.generate.sample`` is the reference: it calls the model's own forward once per token, and that
forward's bookkeeping (a growing cache object, a fresh causal mask, position embeddings, output objects) adds
its own time to the arithmetic. This loop computes the same numbers with the model's own modules:

* the prompts are prefilled once each (a group's rows share theirs): in fp32 plain layers from the fused weights
  (``lean_prefill``: the model's forward in about 20 operators a layer), else by the model's forward as in the
  reference;
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
* plain Llama/Qwen2/Mistral layers take ``decode_step.FusedStep``: q, k and v in one matmul, gate and up in one,
  each RMSNorm one call (in fp32 its weight folded into the matmul after it, and each residual add into the
  matmul before it), q and k rotated together, the attention's scale and mask inside its first batched matmul
  (about 25 operator calls per layer; the model's modules make about 60); others call the model's modules
  (``decode_step.Step``);
* the sampler's noise for every running row is drawn once per step from the generator, in row order, and each
  part of the rows samples its own rows from it (``split_decode.draw``: ``torch.multinomial``'s own draw, so the
  same generator gives the same tokens); logits with NaN or inf show as non-finite log-probs, and the loop raises
  naming those rows after it ends;
* on a CPU, a decode whose matmuls are small runs on one thread, as the reference does (``rlnb.models.threads``:
  at the default's size a second thread's wake-ups cost more than it computes);
* on a CPU with two or more torch threads each step runs as two parts of consecutive rows on two threads, one
  intra-op thread each, each part sampling its own rows (``rlnb.models.split_decode``; ``ForwardOptions(rows=
  "whole")`` runs one part on the calling thread); where the matmuls are small the second part runs in a worker
  process instead, which also prefills its rows (``rlnb.models.decode_worker``: two processes do not queue for
  one Python lock; the same tokens);
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
from rlnb.models import decode_worker, generate, lean_prefill, row_split, split_decode
from rlnb.models.decode_step import FusedStep, State, Step, fusable, weights
from rlnb.models.generate import cache_of, check_sample_args, position_ids
from rlnb.models.precision import autocast_dtype
from rlnb.models.shared_prompt import plain_kv
from rlnb.models.threads import decode_threads, threads

# families whose decoder layer is exactly: x += attn(norm(x)); x += mlp(norm(x)), attention = rotary q/k
# (optionally RMS-normed per head, Qwen3) over all earlier keys
FAMILIES = ("llama", "qwen2", "qwen3", "mistral")


def supported(model) -> bool:
    """True when the lean loop computes what ``model``'s own forward computes (see the module doc)."""
    return not getattr(model, "training", False) and plain(model)         # training: dropout


def plain(model) -> bool:
    """True when ``model`` is one of the ``FAMILIES``' plain decoders (full attention over every earlier key, one
    rotary convention), with no forward replaced and no hook on a module a lean path skips: what ``supported``
    asks of a model apart from its mode (``rlnb.models.lean_forward`` asks the same in training)."""
    if type(model).__name__.startswith("Peft"):
        return False                                                     # a wrapper's own forward
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
    rng = _rng_state(generator)
    try:
        return _sample(model, prompt_ids, prompt_mask, parts, kw, use_worker=True)
    except decode_worker.WorkerFailed:                                   # it died mid-decode: again on threads,
        _set_rng_state(generator, rng)                                   # from the same generator state
        return _sample(model, prompt_ids, prompt_mask, parts, kw, use_worker=False)


def _sample(model, prompt_ids, prompt_mask, parts: int, kw: dict, use_worker: bool):
    dev, T = prompt_ids.device, kw["max_new_tokens"]
    opts = dict(temperature=kw["temperature"], top_p=kw["top_p"], greedy=kw["greedy"])
    with threads(decode_threads(model, prompt_ids.shape[0], dev)):     # the reference's thread rule
        with torch.no_grad(), precision(model, dev):
            half = torch.get_autocast_dtype(dev.type) if torch.is_autocast_enabled(dev.type) else None
            w = weights(model, half) if fusable(model) else None
            # the last rows' part in the decode worker's process where it applies (it prefills them meanwhile)
            remote = decode_worker.start(model, w, prompt_ids, prompt_mask, parts if use_worker else 1, T, opts,
                                         kw["eos_token_id"], kw["pad_token_id"])
            w = w if remote is None else remote.weights(w)               # the worker's copy: one in the cache
        with decode_worker.held(remote):
            lo = remote.lo if remote is not None else len(prompt_ids)
            with torch.no_grad(), precision(model, dev):
                state = _prefill(model, prompt_ids[:lo], prompt_mask[:lo], T, half, w, 1 if remote else parts)
            if state is None:                                            # the prefill's cache is not plain k/v
                return generate.sample(model, prompt_ids, prompt_mask, **kw)
            with torch.no_grad(), precision(model, dev):
                step = FusedStep(w, state) if w is not None else Step(model, state)
                return _decode(model, step, remote, parts=parts, B=len(prompt_ids), **kw)


def _rng_state(generator):
    return torch.get_rng_state() if generator is None else generator.get_state()


def _set_rng_state(generator, state) -> None:
    if generator is None:
        torch.set_rng_state(state)
    else:
        generator.set_state(state)


def precision(model, device: torch.device):
    """The model's own autocast (rlnb's mixed-precision option) around the loop, else nothing: the loop calls the
    model's parts, not its wrapped forward, so it enters the same autocast itself."""
    dtype = autocast_dtype(model)
    return contextlib.nullcontext() if dtype is None else torch.autocast(device.type, dtype=dtype)


def _prefill(model, prompt_ids, prompt_mask, T: int, half, w, parts: int) -> State | None:
    """The decode's ``State`` for these rows: their prompts' keys and values (each distinct prompt once) from the
    fused weights where they fold the norms (fp32 plain layers: ``lean_prefill``, as the decode's ``parts`` row
    parts on parallel threads), else from the model's forward; None where that forward's cache is not plain keys
    and values."""
    Tp = prompt_ids.shape[1]
    attn = prompt_mask.long()
    pos = position_ids(attn)                                             # (B, Tp)
    dec = model.get_decoder()
    if w is not None and w.fold:
        cos, sin = dec.rotary_emb(w.embed[None, :1], position_ids=pos)   # (B, Tp, D) each
        cuts = split_decode.edges(len(prompt_ids), parts)
        layers, logits, rows = lean_prefill.prefill_parts(w, prompt_ids, attn, cos, sin, cuts, row_split.run)
    else:
        sel, rows = lean_prefill.shared_rows(prompt_ids, prompt_mask)
        out = model(input_ids=prompt_ids[sel], attention_mask=attn[sel], position_ids=pos[sel], use_cache=True,
                    logits_to_keep=1)
        layers, logits = plain_kv(cache_of(out)), out.logits[:, -1][rows]
    if layers is None or any(k.shape[-2] != Tp for k, _ in layers):
        return None
    dtype = torch.float32 if half is not None else layers[0][0].dtype
    cos, sin = lean_prefill.decode_angles(model, prompt_ids, pos, T, dtype)
    return lean_prefill.state(layers, logits, rows, prompt_mask, cos, sin, T, half)


def _decode(model, step, remote, *, B, max_new_tokens, eos_token_id, pad_token_id, temperature, top_p, greedy,
            generator, return_logp, parts=1):
    s = step.s
    V = s.logits.shape[1]
    out = split_decode.Out(B, max_new_tokens, eos_token_id, pad_token_id, s.logits.device)
    opts = dict(temperature=temperature, top_p=top_p, greedy=greedy)
    context = lambda: _part_context(model, s.logits.device)             # noqa: E731  what each part runs under
    b, drop, T = B, False, max_new_tokens
    # one part: on this thread; two: the second on a thread, or in the decode worker's process (``remote``)
    rows = split_decode.split(step, s.logits, parts) if remote is None else [
        split_decode.Part(step, torch.arange(remote.lo, device=s.logits.device), s.logits), remote]
    for t in range(max_new_tokens):
        # torch.multinomial's noise for every running row (fp32, as for its fp32 probabilities), drawn here in
        # row order (split_decode.draw)
        noise = None if greedy else torch.empty(b, V, dtype=torch.float32, device=s.logits.device).exponential_(
            generator=generator)
        n_done = split_decode.advance(rows, t, noise, drop, out, opts, context)  # the one host sync per step
        if n_done == b or t == max_new_tokens - 1:
            T = t + 1
            break
        # finished rows leave in batches, on the reference's schedule: the sampler then draws for the same rows
        # as the reference at every step (same tokens for the same generator); one cache copy per drop
        drop = bool(n_done) and (n_done * 8 >= b or b - n_done <= 8)
        b -= n_done if drop else 0
    if remote is not None:
        remote.finish(out)
    tokens, logps = out.tokens[:, :T], out.logps[:, :T]
    broken = ~torch.isfinite(logps).all(-1)                              # NaN/inf logits while the row ran
    if broken.any():
        bad_rows = torch.nonzero(broken).flatten()[:10].tolist()
        raise ValueError(f"logits: NaN or inf in the model's logits for rows {bad_rows} while sampling "
                         "(diverged weights? try a lower lr or max_grad_norm)")
    live = _live(tokens, eos_token_id)                                   # (B, T)
    res = (tokens, live.float(), ~(live & (tokens == eos_token_id)).any(-1))
    return res + (logps,) if return_logp else res


@contextlib.contextmanager
def _part_context(model, device):
    """What ``sample`` runs the loop under, for a part's thread (a thread starts without either)."""
    with torch.no_grad(), precision(model, device):
        yield


def _live(tokens: torch.Tensor, eos_token_id: int) -> torch.Tensor:
    """(B, T) True up to and including each row's first EOS (not ``!= pad``: a model may sample the pad id)."""
    eos = (tokens == eos_token_id).long()
    return (eos.cumsum(-1) - eos) == 0
