"""The update's forward in plain torch where the layers are plain: ``shared_prompt.shared_hidden``'s numbers (each
distinct prompt once, the completions in length buckets attending to their prompt's keys and values) in about a
fifth of the operator calls.

``shared_prompt.shared_hidden`` calls the model's decoder once for the prompts and once per bucket: each call builds
its cache object and masks and runs every layer through its modules (about 6200 operator calls for a 64-row part of
the benchmark's batch). This computes the same from the fused weights of ``decode_step.weights``, built inside the
autograd graph (q, k and v concatenated, gate and up concatenated, in fp32 each RMSNorm's weight folded into the
matmul after it and each residual add inside the matmul before it: rounding only), through
``lean_prefill.run_layers``, the function the decode's prefill runs. The gradient reaches the model's own
parameters through the concatenations and folds.

Why it pays: the update runs as two row parts on two threads (``row_split``), and every operator call takes Python's
lock, so two threads issuing thousands of small calls wait for each other. Measured on the benchmark's machine
(AMD EPYC, 2 cores, the embedded default, the two 64-row parts of a GRPO batch, forward and backward on parallel
threads, median of 10, alternated): 0.235 s through the model's modules, 0.197 s here.

Where it does not apply it returns None and the caller runs the model's own modules: a model other than the plain
decoders ``lean_decode`` runs (``lean_decode.plain``, ``decode_step.fusable``), weights other than fp32, autocast
entered, attention dropout in training, gradient checkpointing (this keeps every activation), or a hook on
any module (the layers' modules are never called).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rlnb.models import lean_decode, lean_prefill
from rlnb.models.buckets import length_buckets, real_lengths
from rlnb.models.decode_step import fusable, weights
from rlnb.models.generate import distinct_prompts, position_ids
from rlnb.models.precision import autocast_dtype


def applies(model) -> bool:
    """True when ``shared_hidden`` computes what the model's own modules compute (see the module doc)."""
    if not lean_decode.plain(model) or not fusable(model):
        return False
    dec, cfg = model.get_decoder(), model.config
    if model.training and (getattr(cfg, "attention_dropout", 0.0) or getattr(dec, "gradient_checkpointing", False)):
        return False
    if autocast_dtype(model) is not None or any(torch.is_autocast_enabled(d) for d in ("cpu", "cuda")):
        return False                                                     # the model rounds to the half dtype
    if any(m._forward_hooks or m._forward_pre_hooks or m._backward_hooks or m._backward_pre_hooks
           for m in model.modules()):
        return False                                                     # a module hook would never run
    return all(p.dtype == torch.float32 for p in model.parameters())


def shared_hidden(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, completion_ids: torch.Tensor,
                  mask: torch.Tensor) -> torch.Tensor | None:
    """(B, T, H) hidden states (after the final norm) at the positions that predict each completion token, every
    distinct prompt run once, zeros where a bucket was cut: ``shared_prompt.shared_hidden``'s contract. None where
    this does not apply (``applies``) or fewer than half the rows repeat a prompt."""
    if not applies(model):
        return None
    B, T = completion_ids.shape
    Tp = prompt_ids.shape[1]
    first, inv = distinct_prompts(prompt_ids, prompt_mask)               # (U,), (B,)
    if 2 * len(first) > B:
        return None
    dec = model.get_decoder()
    w = weights(model, None)                                             # in the graph: gradients reach the weights
    lp, lc = real_lengths(prompt_mask, mask)                             # (B,), (B,)
    wp = max(int(lp.max()), 1)                                           # left padding common to all is cut
    p_ids, p_mask = prompt_ids[first, Tp - wp:], prompt_mask[first, Tp - wp:].long()  # (U, wp)
    x, kv = _layers(dec, w, p_ids, position_ids(p_mask), lean_prefill.prompt_mask(p_mask, w.embed.dtype))
    hidden = x.new_zeros(B, T, x.shape[-1])                              # (B, T, H)
    hidden[:, 0] = x[:, -1][inv]                                         # the prompt's last position: token 0
    for rows in length_buckets(lc):
        wc = int(lc[rows].max())
        if wc < 2:                                                       # only token 0: the prompt predicts it
            continue
        u, c_mask = inv[rows], mask[rows, :wc - 1].long()                # (b,), (b, wc - 1)
        attn = torch.cat([p_mask[u], c_mask], dim=1)                     # (b, wp + wc - 1)
        h, _ = _layers(dec, w, completion_ids[rows, :wc - 1], position_ids(attn)[:, wp:],
                       _completion_mask(p_mask[u], c_mask, w.embed.dtype), [(k[u], v[u]) for k, v in kv])
        hidden[rows[:, None], torch.arange(1, wc, device=rows.device)] = h  # differentiable (CopySlices)
    return F.rms_norm(hidden, (hidden.shape[-1],), dec.norm.weight, dec.norm.variance_epsilon)


def _layers(dec, w, ids: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor, prefix=None):
    """``lean_prefill.run_layers`` over the tokens ``ids`` (b, t) at positions ``pos`` (b, t)."""
    x = F.embedding(ids, dec.embed_tokens.weight, dec.embed_tokens.padding_idx)  # (b, t, H), as nn.Embedding
    cos, sin = dec.rotary_emb(x, position_ids=pos)                       # (b, t, D) each
    return lean_prefill.run_layers(w, x, cos, sin, mask, prefix)


def _completion_mask(p_mask: torch.Tensor, c_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The additive (b, 1, t, wp + t) mask of completion queries over their prompt's keys (its real positions) and
    their own (earlier real ones, and itself: a padding query stays finite, and nothing reads it)."""
    t = c_mask.shape[1]
    prompt = p_mask.bool()[:, None, :].expand(-1, t, -1)                # (b, t, wp)
    return lean_prefill.additive(torch.cat([prompt, lean_prefill.causal_seen(c_mask)], dim=-1), dtype)
