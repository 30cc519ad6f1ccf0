"""Consistency checks for ``Batch`` fields: every wrong shape names the field and what was expected."""

from __future__ import annotations

import torch

_ROW = ["prompt_index", "truncated", "rewards", "correct", "keep"]       # (B,)
_TOKEN = ["completion_ids", "mask", "old_logp", "ref_logp", "old_values", "returns"]  # (B, T)
_FINITE = ["old_logp", "ref_logp", "old_values", "rewards", "adv"]


def _bad(name: str, expected: str, got) -> ValueError:
    return ValueError(f"Batch.{name}: expected {expected}, got {got}")


def check_batch(b) -> None:
    """Raise ``ValueError`` naming the first inconsistent field of batch ``b``."""
    B = len(b.prompts)
    if len(b.answers) != B:
        raise _bad("answers", f"{B} entries (one per row)", len(b.answers))
    if B % b.group_size:
        raise _bad("group_size", f"a divisor of the batch size B={B}", b.group_size)
    for name in _ROW:
        v = getattr(b, name)
        if v is not None and tuple(v.shape) != (B,):
            raise _bad(name, f"shape ({B},)", tuple(v.shape))
    T = None if b.completion_ids is None else b.completion_ids.shape[-1]
    for name in _TOKEN:
        v = getattr(b, name)
        if v is not None and (v.dim() != 2 or v.shape[0] != B or (T is not None and v.shape[1] != T)):
            raise _bad(name, f"shape ({B}, {T if T is not None else 'T'})", tuple(v.shape))
    if b.adv is not None and tuple(b.adv.shape) not in {(B,), (B, T)}:
        raise _bad("adv", f"shape ({B},) or ({B}, {T})", tuple(b.adv.shape))
    if b.completions is not None and len(b.completions) != B:
        raise _bad("completions", f"{B} strings", len(b.completions))
    for name, v in (b.reward_parts or {}).items():
        if tuple(v.shape) != (B,):
            raise _bad(f"reward_parts[{name!r}]", f"shape ({B},)", tuple(v.shape))
    for name in _FINITE:
        v = getattr(b, name)
        if v is not None and v.is_floating_point() and not torch.isfinite(v).all():
            rows = torch.nonzero(~torch.isfinite(v).reshape(B, -1).all(-1)).flatten().tolist()
            raise _bad(name, "finite values", f"NaN or inf in rows {rows[:10]}")
