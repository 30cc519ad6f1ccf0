"""The one function that turns (model, prompt, completion) into per-token log-probs (and friends).

Two LM-head paths give the same numbers:

* ``"fused"`` (the default for every model that exposes its decoder and a plain linear output layer): the
  last hidden states go through ``rlnb.kernels.linear_token_logprobs`` a chunk of tokens at a time (Triton
  on CUDA, the chunked torch twin elsewhere), so the (B, T, V) logits never exist, not even in backward.
* ``"reference"``: the model's own forward builds the full logits, then ``kernels.token_logprobs``. Kept
  as what the tests compare the fused path against (``lm_head_path("reference")``), and for models whose
  head does more than a matmul (logit soft-capping, logit scaling).

The Sampler calls it to record old log-probs right after generation and the Updater calls it for the
current policy, so at the first update the ratio pi/pi_old is exactly 1 (not 1 plus the rounding
difference between generation's incremental KV-cache forward and a full forward).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F

from rlnb import kernels
from rlnb.core import forward_options
from rlnb.core.checks import check_model_inputs
from rlnb.core.forward_options import LM_HEAD_PATHS, ForwardOptions, check_choice
from rlnb.kernels.fused_linear import linear_chunk_rows
from rlnb.models import lean_forward, shared_prompt
from rlnb.models.buckets import bucketed_hidden
from rlnb.models.generate import position_ids


class PolicyOut(NamedTuple):
    logp: torch.Tensor                 # (B, T) fp32 log pi(o_t), 0 on padding
    entropy: torch.Tensor | None       # (B, T) fp32 entropy of pi(. | o_<t), when asked
    values: torch.Tensor | None        # (B, T) fp32 V(s_t), when a value head is given
    topk_ids: torch.Tensor | None      # (B, T, K) long, the K most likely tokens (when topk > 0)
    topk_logp: torch.Tensor | None     # (B, T, K) fp32 their log-probs (or those of given topk_ids)


# PolicyOut field -> the batch extra it needs: the current log-probs of the rollout's top-K tokens are
# taken at the ids the Sampler recorded (DPPO's top-K losses read both).
POLICY_INPUTS = {"topk_logp": "topk_ids"}


# config fields that make the head more than ``hidden @ W.T``: such models take the reference path
_HEAD_EXTRAS = ("final_logit_softcapping", "logit_scale", "logits_scaling", "output_multiplier_scale")


def lm_head_path(name: str):
    """Within the block (this thread only), every ``completion_logprobs`` call takes LM-head path ``name``
    ("fused" or "reference"). A Trainer's steps run with its own ``forward_options`` whatever the block says."""
    check_choice("name", name, LM_HEAD_PATHS)
    return forward_options.using(lm_head=name)


def lm_head() -> str:
    """The LM-head path in force in this thread."""
    return forward_options.current().lm_head


def fused_supported(model) -> bool:
    """True when the model exposes its decoder and an output layer that is a bias-free matmul."""
    if not (hasattr(model, "get_decoder") and hasattr(model, "get_output_embeddings")):
        return False
    head = model.get_output_embeddings()
    if head is None or getattr(head, "bias", None) is not None or getattr(head, "weight", None) is None:
        return False
    cfg = getattr(model, "config", None)
    return not any(getattr(cfg, k, None) not in (None, 1, 1.0) for k in _HEAD_EXTRAS)


def lm_inputs(prompt_ids, prompt_mask, completion_ids, mask):
    """Concatenate prompt and completion into model inputs: ids, attention mask, positions."""
    ids = torch.cat([prompt_ids, completion_ids], dim=1)                 # (B, Tp + T)
    attn = torch.cat([prompt_mask.long(), mask.long()], dim=1)
    return ids, attn, position_ids(attn)


def completion_hidden(model, prompt_ids, prompt_mask, completion_ids, mask, *,
                      padding: str | None = None, layers: str | None = None) -> torch.Tensor:
    """Last hidden states at the positions that predict each completion token: (B, T, H). By default each
    distinct prompt runs once and the completions run in buckets of similar length
    (``rlnb.models.shared_prompt``; zeros where padding was cut); ``padding("bucketed")`` buckets whole rows,
    ``padding("padded")`` asks for one call over the whole padded batch. ``padding``: the mode (None: the one
    in force in this thread). In "shared" mode fp32 plain layers run in fewer calls (``rlnb.models.lean_forward``)
    unless ``layers`` is "modules" (the model's own modules, the reference; None: the option in force)."""
    opts, decoder = forward_options.current(), model.get_decoder()
    mode = padding or opts.padding
    if mode == "shared" and (layers or opts.layers) == "lean":
        hidden = lean_forward.shared_hidden(model, prompt_ids, prompt_mask, completion_ids, mask)
        if hidden is not None:                                           # plain layers: the same in fewer calls
            return hidden
        hidden = shared_prompt.shared_hidden(decoder, prompt_ids, prompt_mask, completion_ids, mask)
        if hidden is not None:
            return hidden
    if mode != "padded":
        return bucketed_hidden(decoder, prompt_ids, prompt_mask, completion_ids, mask, inputs=lm_inputs)
    ids, attn, pos = lm_inputs(prompt_ids, prompt_mask, completion_ids, mask)
    hidden = decoder(input_ids=ids, attention_mask=attn, position_ids=pos).last_hidden_state
    return hidden[:, -completion_ids.shape[1] - 1 : -1]


def completion_logits(model, prompt_ids, prompt_mask, completion_ids, mask, *, fp32_lm_head: bool = False,
                      value_head=None, padding: str | None = None, layers: str | None = None):
    """Logits at the positions that predict each completion token, (B, T, V), and values (B, T) or None.

    With ``fp32_lm_head`` the final projection runs in fp32 (MiniMax-M1, ScaleRL) to shrink the
    numerical mismatch between rollout and training. A value head reads the same hidden states.
    """
    check_model_inputs(model, prompt_ids=prompt_ids, completion_ids=completion_ids)
    T = completion_ids.shape[1]
    if not fp32_lm_head and value_head is None:
        ids, attn, pos = lm_inputs(prompt_ids, prompt_mask, completion_ids, mask)
        out = model(input_ids=ids, attention_mask=attn, position_ids=pos, logits_to_keep=T + 1)
        return out.logits[:, :-1], None                                  # (B, T, V)
    hidden = completion_hidden(model, prompt_ids, prompt_mask, completion_ids, mask, padding=padding,
                               layers=layers)                           # (B, T, H)
    weight = model.get_output_embeddings().weight                       # (V, H)
    logits = F.linear(hidden.float(), weight.float()) if fp32_lm_head else F.linear(hidden, weight)
    values = value_head(hidden.float()) if value_head is not None else None  # fp32 head on bf16 models
    return logits, values


def completion_logprobs(model, prompt_ids, prompt_mask, completion_ids, mask, *, temperature: float = 1.0,
                        entropy: bool = False, fp32_lm_head: bool = False, value_head=None,
                        topk: int = 0, topk_ids: torch.Tensor | None = None,
                        options: ForwardOptions | None = None) -> PolicyOut:
    """Per-token log pi(o_t | prompt, o_<t) at ``temperature``, and what else is asked for.

    ``topk`` > 0 records the K most likely tokens and their log-probs (the Sampler, for DPPO top-K);
    ``topk_ids`` gathers the current log-probs of given ids (the Updater). Padding positions are 0.
    ``options``: backend, LM-head path and padding (None: those in force in this thread), passed down from here.
    """
    opts = options if options is not None else forward_options.current()
    if opts.lm_head == "fused" and fused_supported(model):
        return fused_logprobs(model, prompt_ids, prompt_mask, completion_ids, mask, temperature=temperature,
                              entropy=entropy, fp32_lm_head=fp32_lm_head, value_head=value_head,
                              topk=topk, topk_ids=topk_ids, options=opts)
    logits, values = completion_logits(model, prompt_ids, prompt_mask, completion_ids, mask,
                                       fp32_lm_head=fp32_lm_head, value_head=value_head, padding=opts.padding,
                                       layers=opts.layers)
    logp, ent = kernels.token_logprobs(logits, completion_ids, temperature=temperature, entropy=entropy,
                                       backend=opts.backend)
    m = mask.to(logp.dtype)
    tk_ids, tk_logp = topk_ids, None
    if topk or topk_ids is not None:
        scaled = logits.float() / temperature                            # (B, T, V) only in top-K mode
        lse = torch.logsumexp(scaled, dim=-1, keepdim=True)
        if tk_ids is None:
            tk_ids = scaled.topk(topk, dim=-1).indices                   # (B, T, K)
        tk_logp = (scaled.gather(-1, tk_ids) - lse) * m[..., None]
    return PolicyOut(logp * m, None if ent is None else ent * m, None if values is None else values * m,
                     tk_ids, tk_logp)


def fused_logprobs(model, prompt_ids, prompt_mask, completion_ids, mask, *, temperature: float = 1.0,
                   entropy: bool = False, fp32_lm_head: bool = False, value_head=None, topk: int = 0,
                   topk_ids: torch.Tensor | None = None, options: ForwardOptions | None = None) -> PolicyOut:
    """``completion_logprobs`` through the fused LM head: only the completion tokens (mask = 1) go through
    ``hidden @ W.T``, a chunk at a time; padding stays 0 as on the reference path."""
    opts = options if options is not None else forward_options.current()
    check_model_inputs(model, prompt_ids=prompt_ids, completion_ids=completion_ids)
    hidden = completion_hidden(model, prompt_ids, prompt_mask, completion_ids, mask, padding=opts.padding,
                               layers=opts.layers)                      # (B, T, H)
    weight = model.get_output_embeddings().weight                                   # (V, H)
    h, w = (hidden.float(), weight.float()) if fp32_lm_head else (hidden.to(weight.dtype), weight)
    sel = mask.bool()                                                               # (B, T)
    hs, ys = h[sel], completion_ids[sel]                                            # (N, H), (N,)
    lp, ent = kernels.linear_token_logprobs(hs, w, ys, temperature=temperature, entropy=entropy,
                                            backend=opts.backend)
    logp, H = _scatter(lp, sel), (None if ent is None else _scatter(ent, sel))     # (B, T)
    values = value_head(hidden.float()) * mask.to(torch.float32) if value_head is not None else None
    tk_ids, tk_logp = topk_ids, None
    if topk or topk_ids is not None:
        if tk_ids is None:
            tk_ids = _chunked_topk(h, w, topk, temperature)                         # (B, T, K)
        tk_logp = _scatter(_topk_logp(hs, w, ys, lp, tk_ids[sel], temperature), sel)  # (B, T, K)
    return PolicyOut(logp, H, values, tk_ids, tk_logp)


def _scatter(x: torch.Tensor, sel: torch.Tensor) -> torch.Tensor:
    """(N, ...) values of the selected tokens -> (B, T, ...) with zeros elsewhere (differentiable)."""
    out = x.new_zeros(tuple(sel.shape) + tuple(x.shape[1:]))
    out[sel] = x
    return out


def _chunked_topk(h: torch.Tensor, w: torch.Tensor, k: int, temperature: float) -> torch.Tensor:
    """The K most likely token ids per position, (B, T, K), from (C, V) logits chunks (no gradient: ids)."""
    flat = h.reshape(-1, h.shape[-1])                                               # (B T, H)
    chunk = linear_chunk_rows(flat.shape[0], flat.shape[1], w.shape[0])
    with torch.no_grad():
        ids = [(flat[i:i + chunk] @ w.T).float().div_(temperature).topk(k, dim=-1).indices
               for i in range(0, flat.shape[0], chunk)]
    return torch.cat(ids).reshape(*h.shape[:-1], k)


def _topk_logp(hs, w, ys, logp_y, ids, temperature: float) -> torch.Tensor:
    """log pi of given ids (N, K) without the logits: lse = z_y - logp_y, so log p_k = z_k - z_y + logp_y.

    z_k = h . W_k / T is a K-long dot product per token; the gradient reaches lse through logp_y."""
    z_k = torch.einsum("nh,nkh->nk", hs.float(), w[ids].float()) / temperature      # (N, K)
    z_y = torch.einsum("nh,nh->n", hs.float(), w[ys].float()) / temperature         # (N,)
    return z_k - (z_y - logp_y)[:, None]
