"""Reward shaping: pure functions added to the task's reward before advantages are computed."""

from __future__ import annotations

import torch

from rlnb.core.checks import check_int, check_tensor


def overlong_penalty(lengths: torch.Tensor, *, max_new_tokens: int, overlong_buffer: int) -> torch.Tensor:
    """DAPO soft overlong punishment (arXiv 2503.14476, eq. 13), L_max = ``max_new_tokens``,
    L_cache = ``overlong_buffer``:

        R(|y|) = 0                                   if |y| <= L_max - L_cache
                 ((L_max - L_cache) - |y|) / L_cache  if L_max - L_cache < |y| <= L_max
                 -1                                  if |y| > L_max

    Shapes: lengths (B,) -> (B,) float, added to the reward. The paper uses L_max 20480, L_cache 4096.
    ``overlong_buffer = 0`` turns shaping off below L_max (completions cannot be longer than L_max).

    >>> overlong_penalty(torch.tensor([10, 12, 14, 16, 17]), max_new_tokens=16, overlong_buffer=4)
    tensor([ 0.0000,  0.0000, -0.5000, -1.0000, -1.0000])
    """
    check_tensor("lengths", lengths, dim=1, finite=True)
    check_int("max_new_tokens", max_new_tokens, low=1)
    if lengths.numel() and bool((lengths < 0).any()):
        raise ValueError(f"lengths: expected completion lengths >= 0, got {lengths.min().item()}")
    if not isinstance(overlong_buffer, int) or not 0 <= overlong_buffer <= max_new_tokens:
        raise ValueError(f"overlong_buffer: expected an int in [0, max_new_tokens={max_new_tokens}], "
                         f"got {overlong_buffer!r}")
    n = lengths.to(torch.float32)                                      # (B,)
    start = max_new_tokens - overlong_buffer
    ramp = (start - n) / max(overlong_buffer, 1)                       # <= 0 past the start
    pen = torch.where(n <= start, torch.zeros_like(n), ramp)
    return torch.where(n > max_new_tokens, torch.full_like(n, -1.0), pen)
