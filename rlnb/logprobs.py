"""Per-token log-probabilities and entropies from logits (placeholder; the kernels issue expands it)."""

from __future__ import annotations

import torch


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, *, temperature: float = 1.0,
                   entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log pi(target) and (optionally) the entropy H per position, reduced in fp32.

    logits (..., V) any float dtype, targets (...) long -> logp (...) fp32, entropy (...) fp32 or None.
    """
    logp_all = torch.log_softmax(logits.float() / temperature, dim=-1)  # (..., V)
    logp = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    ent = -(logp_all.exp() * logp_all).sum(-1) if entropy else None
    return logp, ent
