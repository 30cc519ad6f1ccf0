"""Consistency checks for ``Batch`` fields: every wrong shape, dtype or value names the field and what was
expected, and for NaN or inf which rows hold them."""

from __future__ import annotations

import torch

_ROW = ["prompt_index", "truncated", "rewards", "correct", "keep"]       # (B,)
_TOKEN = ["completion_ids", "mask", "old_logp", "ref_logp", "old_values", "returns"]  # (B, T)
_FINITE = ["old_logp", "ref_logp", "old_values", "rewards", "adv", "returns"]
_INT = ["prompt_index", "prompt_ids", "completion_ids"]                  # token ids and indices
_FLOAT = ["old_logp", "ref_logp", "old_values", "rewards", "adv", "returns"]
_BOOL = ["truncated", "correct", "keep"]


def _bad(name: str, expected: str, got) -> ValueError:
    return ValueError(f"Batch.{name}: expected {expected}, got {got}")


def _rows(bad: torch.Tensor) -> list[int]:
    """First (at most 10) row indices where ``bad`` (B, ...) is True anywhere."""
    return torch.nonzero(bad.reshape(bad.shape[0], -1).any(-1)).flatten()[:10].tolist()


def check_batch(b) -> None:
    """Raise ``ValueError`` naming the first inconsistent field of batch ``b``."""
    B = len(b.prompts)
    if not isinstance(b.group_size, int) or isinstance(b.group_size, bool) or b.group_size < 1:
        raise _bad("group_size", "a positive int (G)", repr(b.group_size))
    if len(b.answers) != B:
        raise _bad("answers", f"{B} entries (one per row)", len(b.answers))
    if B % b.group_size:
        raise _bad("group_size", f"a divisor of the batch size B={B}", b.group_size)
    _check_shapes(b, B)
    _check_dtypes(b)
    _check_values(b, B)


def _check_shapes(b, B: int) -> None:
    for name in _ROW:
        v = getattr(b, name)
        if v is not None and tuple(v.shape) != (B,):
            raise _bad(name, f"shape ({B},)", tuple(v.shape))
    if b.prompt_ids is not None:
        if b.prompt_ids.dim() != 2 or b.prompt_ids.shape[0] != B:
            raise _bad("prompt_ids", f"shape ({B}, Tp)", tuple(b.prompt_ids.shape))
        if b.prompt_mask is None or b.prompt_mask.shape != b.prompt_ids.shape:
            got = None if b.prompt_mask is None else tuple(b.prompt_mask.shape)
            raise _bad("prompt_mask", f"shape {tuple(b.prompt_ids.shape)} like prompt_ids", got)
    T = None if b.completion_ids is None else b.completion_ids.shape[-1]
    if T == 0:
        raise _bad("completion_ids", "at least one token column (T >= 1)", f"shape {tuple(b.completion_ids.shape)}")
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


def _check_dtypes(b) -> None:
    for names, ok, what in ((_INT, lambda v: not v.is_floating_point() and v.dtype != torch.bool, "an integer dtype"),
                            (_FLOAT, torch.Tensor.is_floating_point, "a floating-point dtype"),
                            (_BOOL, lambda v: v.dtype == torch.bool, "dtype torch.bool")):
        for name in names:
            v = getattr(b, name)
            if v is not None and not ok(v):
                raise _bad(name, what, v.dtype)


def _check_values(b, B: int) -> None:
    for name in _FINITE:
        v = getattr(b, name)
        if v is not None and not torch.isfinite(v).all():
            raise _bad(name, "finite values", f"NaN or inf in rows {_rows(~torch.isfinite(v))}")
    if b.mask is not None:
        if not ((b.mask == 0) | (b.mask == 1)).all():
            raise _bad("mask", "0/1 values", f"other values in rows {_rows((b.mask != 0) & (b.mask != 1))}")
