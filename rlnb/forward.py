"""The one function that turns (model, prompt, completion) into per-token log-probs.

The Sampler calls it to record old log-probs right after generation and the Updater calls it for the
current policy, so at the first update the ratio pi/pi_old is exactly 1 (not 1 plus the rounding
difference between generation's incremental KV-cache forward and a full forward).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rlnb import kernels
from rlnb.generate import position_ids


def lm_inputs(prompt_ids, prompt_mask, completion_ids, mask):
    """Concatenate prompt and completion into model inputs: ids, attention mask, positions."""
    ids = torch.cat([prompt_ids, completion_ids], dim=1)                 # (B, Tp + T)
    attn = torch.cat([prompt_mask.long(), mask.long()], dim=1)
    return ids, attn, position_ids(attn)


def completion_logits(model, prompt_ids, prompt_mask, completion_ids, mask, *, fp32_lm_head: bool = False):
    """Logits at the positions that predict each completion token: (B, T, V).

    With ``fp32_lm_head`` the final projection runs in fp32 (MiniMax-M1, ScaleRL) to shrink the
    numerical mismatch between rollout and training; otherwise it runs in the model's dtype.
    """
    ids, attn, pos = lm_inputs(prompt_ids, prompt_mask, completion_ids, mask)
    T = completion_ids.shape[1]
    if not fp32_lm_head:
        out = model(input_ids=ids, attention_mask=attn, position_ids=pos, logits_to_keep=T + 1)
        return out.logits[:, :-1]                                        # (B, T, V)
    hidden = model.get_decoder()(input_ids=ids, attention_mask=attn, position_ids=pos).last_hidden_state
    weight = model.get_output_embeddings().weight                       # (V, H)
    return F.linear(hidden[:, -T - 1 : -1].float(), weight.float())      # (B, T, V) fp32


def completion_logprobs(model, prompt_ids, prompt_mask, completion_ids, mask, *, temperature: float = 1.0,
                        entropy: bool = False, fp32_lm_head: bool = False):
    """Per-token log pi(o_t | prompt, o_<t) at ``temperature`` and (optionally) the entropy: (B, T) fp32.

    Padding positions (mask 0) are set to 0 so they never leak into sums.
    """
    logits = completion_logits(model, prompt_ids, prompt_mask, completion_ids, mask, fp32_lm_head=fp32_lm_head)
    logp, ent = kernels.token_logprobs(logits, completion_ids, temperature=temperature, entropy=entropy)
    logp = logp * mask
    return logp, (ent * mask if ent is not None else None)
