"""The zoo's inputs, checked and viewed the same way by every family file: rewards as whole groups (the advantage
estimators), a required extra input, and the (logp, old_logp, adv, mask) of a per-token loss. A bad input raises
naming the argument."""

from __future__ import annotations

import torch

from rlnb.core.checks import check_same_device, check_tensor


def as_float(x: torch.Tensor) -> torch.Tensor:
    """Keep float dtypes (fp64 for gradcheck), promote integers and bools to fp32."""
    return x if x.is_floating_point() else x.float()


def check_group_size(group_size) -> None:
    """G: a positive int (not a bool)."""
    if not isinstance(group_size, int) or isinstance(group_size, bool):
        raise TypeError(f"group_size: expected a positive int (G), got {group_size!r}")
    if group_size < 1:
        raise ValueError(f"group_size: expected a positive int (G), got {group_size!r}")


def groups(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """View ``(B,)`` rewards as ``(P, G)``, after checking them: a finite 1-D tensor of whole groups."""
    check_tensor("rewards", rewards, finite=True)
    check_group_size(group_size)
    if rewards.dim() != 1 or rewards.numel() % group_size or not rewards.numel():
        raise ValueError(
            f"rewards: expected a 1-D tensor whose length is a multiple of group_size={group_size}, "
            f"got shape {tuple(rewards.shape)}"
        )
    return as_float(rewards).view(-1, group_size)


def extra_input(name: str, value, rewards: torch.Tensor, entry: str, what: str) -> torch.Tensor:
    """A required extra input as a float tensor shaped like ``rewards``; a clear ValueError if missing."""
    if value is None:
        raise ValueError(f"{name}: the advantage estimator {entry!r} needs {what} as a ({rewards.numel()},) "
                         f"tensor (it is listed in its extra_inputs), got None")
    value = as_float(check_tensor(name, value, finite=True))
    check_same_device(rewards=rewards, **{name: value})
    if value.shape != rewards.shape:
        raise ValueError(f"{name}: expected shape {tuple(rewards.shape)} like rewards, got {tuple(value.shape)}")
    return value


def centred(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """(P, G) rewards minus their group's mean."""
    r = groups(rewards, group_size)                                  # (P, G)
    return r - r.mean(dim=1, keepdim=True)                            # (P, G)


def token_adv(adv: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    """A per-sequence (B,) advantage broadcast over the tokens of ``logp`` (B, T); a (B, T) one as it is."""
    return adv.unsqueeze(-1).expand_as(logp) if adv.dim() == 1 else adv


def prepare_tokens(logp, old_logp, adv, mask) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Check types, shapes, devices, finiteness and the 0/1 mask; return (A (B, T) detached, m (B, T)
    float mask, valid (B, T) bool)."""
    for name, x in (("logp", logp), ("old_logp", old_logp)):
        check_tensor(name, x, floating=True, finite=True)
    check_tensor("adv", adv, finite=True)
    check_tensor("mask", mask)
    check_same_device(logp=logp, old_logp=old_logp, adv=adv, mask=mask)
    check_mask(mask)
    if logp.dim() != 2 or old_logp.shape != logp.shape or mask.shape != logp.shape:
        raise ValueError(f"logp, old_logp, mask: expected equal (B, T) shapes, got {tuple(logp.shape)}, "
                         f"{tuple(old_logp.shape)}, {tuple(mask.shape)}")
    if adv.shape not in (logp.shape[:1], logp.shape):
        raise ValueError(f"adv: expected shape (B,) or (B, T) = {tuple(logp.shape)}, got {tuple(adv.shape)}")
    return token_adv(adv, logp).detach(), mask.to(logp.dtype), mask.bool()


def check_mask(mask, arg: str = "mask") -> None:
    """A tensor of 0s and 1s (bool, int or float)."""
    check_tensor(arg, mask)
    if mask.numel() and not bool(((mask == 0) | (mask == 1)).all()):
        raise ValueError(f"{arg}: expected 0/1 values (1 on tokens in the loss), got others such as "
                         f"{mask[(mask != 0) & (mask != 1)].flatten()[0].item()}")


def no_tokens(valid: torch.Tensor) -> torch.Tensor:
    """All False, shaped like ``valid``: a loss that clips nothing."""
    return torch.zeros_like(valid)
