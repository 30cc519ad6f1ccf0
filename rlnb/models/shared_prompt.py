"""A forward that computes each prompt once per group, not once per completion.

GRPO and its relatives sample G completions of every prompt, so a batch of B rows holds only B / G distinct
prompts. The padded and bucketed forwards run every row's prompt again (on the default run 9 of about 26
positions per row). ``shared_hidden`` instead:

1. runs the distinct prompts once, keeping their keys and values (the KV cache, with its gradient);
2. gives each completion its prompt's keys and values (an index, so the backward sums the G rows' gradients
   into the one prompt they share);
3. runs the completions in buckets of similar length (``rlnb.models.buckets.split_sizes``), each at its own
   width, attending to the prompt's cache.

Why the numbers do not change: under the causal mask a prompt position never sees the completion, so its
hidden state, keys and values are the same whether the completion follows it or not, and each completion
position sees the same keys and values at the same positions as on the padded path (to rounding). The last
completion token is not fed: its hidden state predicts nothing the loss reads.

Models whose cache is more than plain growing keys and values (sliding windows, linear attention) and
decoders under gradient checkpointing (which turns the cache off) take the bucketed forward instead.
"""

from __future__ import annotations

import torch

from rlnb.models.buckets import length_buckets, real_lengths
from rlnb.models.generate import cache_arg_name, cache_of, distinct_prompts, position_ids


def plan(prompt_ids, prompt_mask, mask) -> dict[str, float]:
    """Positions the shared-prompt forward computes and how many of them hold tokens."""
    lp, lc = real_lengths(prompt_mask, mask)
    first, _ = distinct_prompts(prompt_ids, prompt_mask)
    wp = max(int(lp.max()), 1)
    computed = len(first) * wp + sum(len(r) * max(int(lc[r].max()) - 1, 0) for r in length_buckets(lc))
    real = float(lp[first].sum()) + float((lc - 1).clamp(min=0).sum())
    return {"computed": float(computed), "real": real, "distinct_prompts": len(first)}


def plain_kv(cache) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
    """Per layer (keys, values) when every layer is a plain growing cache; None otherwise."""
    if cache is None:
        return None
    if isinstance(cache, (tuple, list)):                                   # legacy tuple-of-tuples
        return [tuple(layer[:2]) for layer in cache]
    if hasattr(cache, "layers"):                                           # transformers >= 4.56
        from transformers.cache_utils import DynamicLayer
        if not all(type(layer) is DynamicLayer for layer in cache.layers):
            return None
        return [(layer.keys, layer.values) for layer in cache.layers]
    if hasattr(cache, "key_cache") and not getattr(cache, "is_sliding", None):
        return list(zip(cache.key_cache, cache.value_cache))
    return None


def _cache_from(kv: list[tuple[torch.Tensor, torch.Tensor]]):
    """A fresh DynamicCache holding ``kv`` (no copy; the gradient flows back through it)."""
    from transformers import DynamicCache
    try:
        return DynamicCache(ddp_cache_data=kv)
    except TypeError:                                                      # transformers < 4.56
        return DynamicCache.from_legacy_cache(tuple(kv))


def shared_hidden(decoder, prompt_ids, prompt_mask, completion_ids, mask) -> torch.Tensor | None:
    """(B, T, H) hidden states at the positions that predict each completion token, every distinct prompt
    run once; zeros where a bucket was cut. None (the caller then takes the bucketed forward) when fewer
    than half the rows repeat a prompt, or the decoder's cache cannot be shared."""
    B, T = completion_ids.shape
    Tp = prompt_ids.shape[1]
    if decoder.training and getattr(decoder, "gradient_checkpointing", False):
        return None                                                        # checkpointing turns the cache off
    first, inv = distinct_prompts(prompt_ids, prompt_mask)                 # (U,), (B,)
    if 2 * len(first) > B:
        return None
    lp, lc = real_lengths(prompt_mask, mask)                               # (B,), (B,)
    wp = max(int(lp.max()), 1)                                             # left padding common to all is cut
    p_ids, p_mask = prompt_ids[first, Tp - wp:], prompt_mask[first, Tp - wp:].long()  # (U, wp)
    out = decoder(input_ids=p_ids, attention_mask=p_mask, position_ids=position_ids(p_mask), use_cache=True)
    kv = plain_kv(cache_of(out))
    if kv is None:
        return None
    h_last = out.last_hidden_state[:, -1]                                  # (U, H): predicts completion token 0
    hidden = h_last.new_zeros(B, T, h_last.shape[-1])                      # (B, T, H)
    hidden[:, 0] = h_last[inv]
    cache_kw = cache_arg_name(decoder)
    for rows in length_buckets(lc):
        wc = int(lc[rows].max())
        if wc < 2:                                                         # only token 0: the prompt predicts it
            continue
        u = inv[rows]                                                      # (b,) each row's distinct prompt
        attn = torch.cat([p_mask[u], mask[rows, :wc - 1].long()], dim=1)   # (b, wp + wc - 1)
        cache = _cache_from([(k[u], v[u]) for k, v in kv])
        h = decoder(input_ids=completion_ids[rows, :wc - 1], attention_mask=attn,
                    position_ids=position_ids(attn)[:, wp:], use_cache=True, **{cache_kw: cache}).last_hidden_state
        hidden[rows[:, None], torch.arange(1, wc, device=rows.device)] = h  # differentiable (CopySlices)
    return hidden
