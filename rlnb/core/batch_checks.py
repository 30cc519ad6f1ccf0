"""Consistency checks for ``Batch`` fields: every wrong type, shape, dtype, device or value names the field
and what was expected, and for NaN or inf which rows hold them. Also what each stage needs from the batch
(``require``), so a stage handed a batch without its inputs says which field and which stage makes it."""

from __future__ import annotations

import torch

_ROW = ["prompt_index", "truncated", "rewards", "correct", "keep"]       # (B,)
_TOKEN = ["completion_ids", "mask", "old_logp", "rollout_logp", "ref_logp", "old_values", "returns"]  # (B, T)
_TENSORS = ["prompt_index", "prompt_ids", "prompt_mask", "completion_ids", "mask", "truncated", "old_logp", "rollout_logp",
            "ref_logp", "old_values", "rewards", "correct", "adv", "keep", "returns"]
_FINITE = ["old_logp", "rollout_logp", "ref_logp", "old_values", "rewards", "adv", "returns"]
_INT = ["prompt_index", "prompt_ids", "completion_ids"]                  # token ids and indices
_FLOAT = ["old_logp", "rollout_logp", "ref_logp", "old_values", "rewards", "adv", "returns"]
_BOOL = ["truncated", "correct", "keep"]
MADE_BY = {"prompt_ids": "Sampler", "prompt_mask": "Sampler", "completion_ids": "Sampler", "mask": "Sampler",
            "completions": "Sampler", "old_logp": "Sampler", "ref_logp": "Sampler (given a ref_model)",
            "old_values": "Sampler (given the value head)", "truncated": "Sampler", "rewards": "Rewarder",
            "correct": "Rewarder", "adv": "Advantager", "returns": "Advantager (with a critic)"}


def _bad(name: str, expected: str, got) -> ValueError:
    return ValueError(f"Batch.{name}: expected {expected}, got {got}")


def _rows(bad: torch.Tensor) -> list[int]:
    """First (at most 10) row indices where ``bad`` (B, ...) is True anywhere."""
    return torch.nonzero(bad.reshape(bad.shape[0], -1).any(-1)).flatten()[:10].tolist()


def check_batch(b) -> None:
    """Raise ``TypeError``/``ValueError`` naming the first inconsistent field of batch ``b``."""
    _check_types(b)
    B = len(b.prompts)
    if not isinstance(b.group_size, int) or isinstance(b.group_size, bool) or b.group_size < 1:
        raise _bad("group_size", "a positive int (G)", repr(b.group_size))
    if len(b.answers) != B:
        raise _bad("answers", f"{B} entries (one per row)", len(b.answers))
    if B % b.group_size:
        raise _bad("group_size", f"a divisor of the batch size B={B}", b.group_size)
    _check_shapes(b, B)
    _check_dtypes(b)
    _check_devices(b)
    _check_groups(b, B)
    _check_values(b, B)


def _check_types(b) -> None:
    for name in ("prompts", "answers", "completions"):
        v = getattr(b, name)
        if v is None and name == "completions":
            continue
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            got = type(v).__name__ if not isinstance(v, list) else "a list with " + type(
                next(x for x in v if not isinstance(x, str))).__name__
            raise TypeError(f"Batch.{name}: expected a list of strings, got {got}")
    for name in _TENSORS:
        v = getattr(b, name)
        if v is not None and not isinstance(v, torch.Tensor):
            raise TypeError(f"Batch.{name}: expected a torch.Tensor, got {type(v).__name__}")
    for name in ("reward_parts", "extras"):
        v = getattr(b, name)
        if v is None and name == "reward_parts":
            continue
        ok = (lambda x: isinstance(x, torch.Tensor)) if name == "reward_parts" else _extra_ok
        if not isinstance(v, dict) or not all(isinstance(k, str) and ok(x) for k, x in v.items()):
            what = "torch.Tensor" if name == "reward_parts" else "(B, ...) tensor or list of B strings"
            raise TypeError(f"Batch.{name}: expected a dict of name -> {what}, got {v!r:.80}")


def _extra_ok(x) -> bool:
    return isinstance(x, torch.Tensor) or (isinstance(x, list) and all(isinstance(s, str) for s in x))


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
    elif b.prompt_mask is not None:
        raise _bad("prompt_mask", "None without prompt_ids", tuple(b.prompt_mask.shape))
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
    for field in ("reward_parts", "extras"):
        for name, v in (getattr(b, field) or {}).items():
            if isinstance(v, list):  # extras: B strings (e.g. the greedy completions)
                if len(v) != B:
                    raise _bad(f"{field}[{name!r}]", f"{B} strings (one per row)", len(v))
            elif (tuple(v.shape) != (B,)) if field == "reward_parts" else (v.dim() == 0 or v.shape[0] != B):
                raise _bad(f"{field}[{name!r}]", f"shape ({B},{'' if field == 'reward_parts' else ' ...'})",
                           tuple(v.shape))


def _check_dtypes(b) -> None:
    for names, ok, what in ((_INT, lambda v: not v.is_floating_point() and v.dtype != torch.bool and not v.is_complex(),
                             "an integer dtype"),
                            (_FLOAT, torch.Tensor.is_floating_point, "a floating-point dtype"),
                            (_BOOL, lambda v: v.dtype == torch.bool, "dtype torch.bool")):
        for name in names:
            v = getattr(b, name)
            if v is not None and not ok(v):
                raise _bad(name, what, v.dtype)
    for name in ("mask", "prompt_mask"):
        v = getattr(b, name)
        if v is not None and v.is_complex():
            raise _bad(name, "a real (0/1) dtype", v.dtype)
    for name, v in (b.reward_parts or {}).items():
        if not v.is_floating_point():
            raise _bad(f"reward_parts[{name!r}]", "a floating-point dtype", v.dtype)


def _check_devices(b) -> None:
    tensors = [(n, getattr(b, n)) for n in _TENSORS if getattr(b, n) is not None]
    tensors += [(f"reward_parts[{k!r}]", v) for k, v in (b.reward_parts or {}).items()]
    tensors += [(f"extras[{k!r}]", v) for k, v in b.extras.items() if isinstance(v, torch.Tensor)]
    first = tensors[0] if tensors else None
    for name, v in tensors:
        if v.device != first[1].device:
            raise _bad(name, f"a tensor on {first[1].device} like {first[0]} (use batch.to(device))", v.device)


def _check_groups(b, B: int) -> None:
    """Rows of a group are contiguous: G consecutive rows share one prompt, answer and prompt index."""
    G = b.group_size
    if G == 1:
        return
    for name in ("prompts", "answers"):
        v = getattr(b, name)
        for i in range(0, B, G):
            if any(x != v[i] for x in v[i + 1 : i + G]):
                raise _bad(name, f"groups of G={G} contiguous rows with one prompt each (rows {i}..{i + G - 1})",
                           "different values within the group")
    idx = b.prompt_index.view(-1, G)                                     # (P, G)
    split = (idx != idx[:, :1]).any(-1)
    if bool(split.any()):
        p = int(torch.nonzero(split)[0])
        raise _bad("prompt_index", f"one index per group of G={G} contiguous rows", f"{idx[p].tolist()} in group {p}")


def _check_values(b, B: int) -> None:
    for name in _FINITE:
        v = getattr(b, name)
        if v is not None and not torch.isfinite(v).all():
            raise _bad(name, "finite values", f"NaN or inf in rows {_rows(~torch.isfinite(v))}")
    for name, v in (b.reward_parts or {}).items():
        if not torch.isfinite(v).all():
            raise _bad(f"reward_parts[{name!r}]", "finite values", f"NaN or inf in rows {_rows(~torch.isfinite(v))}")
    for name, padded in (("mask", "right"), ("prompt_mask", "left")):
        m = getattr(b, name)
        if m is None:
            continue
        if not ((m == 0) | (m == 1)).all():
            raise _bad(name, "0/1 values", f"other values in rows {_rows((m != 0) & (m != 1))}")
        on = m.bool()
        gaps = (on[:, 1:] & ~on[:, :-1]) if padded == "right" else (~on[:, 1:] & on[:, :-1])  # a 0 before a 1 / after
        if bool(gaps.any()):
            raise _bad(name, f"{padded}-padded rows (the {'1s first' if padded == 'right' else '0s first'})",
                       f"gaps in rows {_rows(gaps)}")
    for name in ("prompt_ids", "completion_ids", "prompt_index"):
        v = getattr(b, name)
        if v is not None and v.numel() and bool((v < 0).any()):
            raise _bad(name, "non-negative ids", f"negative values in rows {_rows(v < 0)}")
