"""The one function that turns (model, prompt, completion) into per-token log-probs (and friends).

The Sampler calls it to record old log-probs right after generation and the Updater calls it for the
current policy, so at the first update the ratio pi/pi_old is exactly 1 (not 1 plus the rounding
difference between generation's incremental KV-cache forward and a full forward).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F

from rlnb import kernels
from rlnb.generate import position_ids


class PolicyOut(NamedTuple):
    logp: torch.Tensor                 # (B, T) fp32 log pi(o_t), 0 on padding
    entropy: torch.Tensor | None       # (B, T) fp32 entropy of pi(. | o_<t), when asked
    values: torch.Tensor | None        # (B, T) fp32 V(s_t), when a value head is given
    topk_ids: torch.Tensor | None      # (B, T, K) long, the K most likely tokens (when topk > 0)
    topk_logp: torch.Tensor | None     # (B, T, K) fp32 their log-probs (or those of given topk_ids)


# PolicyOut field -> the batch extra it needs: the current log-probs of the rollout's top-K tokens are
# taken at the ids the Sampler recorded (DPPO's top-K losses read both).
POLICY_INPUTS = {"topk_logp": "topk_ids"}


def lm_inputs(prompt_ids, prompt_mask, completion_ids, mask):
    """Concatenate prompt and completion into model inputs: ids, attention mask, positions."""
    ids = torch.cat([prompt_ids, completion_ids], dim=1)                 # (B, Tp + T)
    attn = torch.cat([prompt_mask.long(), mask.long()], dim=1)
    return ids, attn, position_ids(attn)


def completion_hidden(model, prompt_ids, prompt_mask, completion_ids, mask) -> torch.Tensor:
    """Last hidden states at the positions that predict each completion token: (B, T, H)."""
    ids, attn, pos = lm_inputs(prompt_ids, prompt_mask, completion_ids, mask)
    hidden = model.get_decoder()(input_ids=ids, attention_mask=attn, position_ids=pos).last_hidden_state
    return hidden[:, -completion_ids.shape[1] - 1 : -1]


def completion_logits(model, prompt_ids, prompt_mask, completion_ids, mask, *, fp32_lm_head: bool = False,
                      value_head=None):
    """Logits at the positions that predict each completion token, (B, T, V), and values (B, T) or None.

    With ``fp32_lm_head`` the final projection runs in fp32 (MiniMax-M1, ScaleRL) to shrink the
    numerical mismatch between rollout and training. A value head reads the same hidden states.
    """
    T = completion_ids.shape[1]
    if not fp32_lm_head and value_head is None:
        ids, attn, pos = lm_inputs(prompt_ids, prompt_mask, completion_ids, mask)
        out = model(input_ids=ids, attention_mask=attn, position_ids=pos, logits_to_keep=T + 1)
        return out.logits[:, :-1], None                                  # (B, T, V)
    hidden = completion_hidden(model, prompt_ids, prompt_mask, completion_ids, mask)  # (B, T, H)
    weight = model.get_output_embeddings().weight                       # (V, H)
    logits = F.linear(hidden.float(), weight.float()) if fp32_lm_head else F.linear(hidden, weight)
    values = value_head(hidden.float()) if value_head is not None else None  # fp32 head on bf16 models
    return logits, values


def completion_logprobs(model, prompt_ids, prompt_mask, completion_ids, mask, *, temperature: float = 1.0,
                        entropy: bool = False, fp32_lm_head: bool = False, value_head=None,
                        topk: int = 0, topk_ids: torch.Tensor | None = None) -> PolicyOut:
    """Per-token log pi(o_t | prompt, o_<t) at ``temperature``, and what else is asked for.

    ``topk`` > 0 records the K most likely tokens and their log-probs (the Sampler, for DPPO top-K);
    ``topk_ids`` gathers the current log-probs of given ids (the Updater). Padding positions are 0.
    """
    logits, values = completion_logits(model, prompt_ids, prompt_mask, completion_ids, mask,
                                       fp32_lm_head=fp32_lm_head, value_head=value_head)
    logp, ent = kernels.token_logprobs(logits, completion_ids, temperature=temperature, entropy=entropy)
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
