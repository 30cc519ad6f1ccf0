"""Launch heuristics for the token kernels, kept apart from the lesson.

One program per token row, looping over the vocabulary in blocks. Why rows go on grid axis 0 only:
CUDA allows 2**31 - 1 programs along x but only 65535 along y and z, so a (B, T) grid breaks for a
single 65536-token sequence; we flatten every row into x. The row index is then widened to int64 in
the kernel before it is multiplied by the row stride (65536 * 151936 > 2**31).

>>> launch_config(65536, 151936, 2, kind="backward")
LaunchConfig(grid=(65536,), BLOCK_V=4096, num_warps=8)
>>> launch_config(37, 1000, 4)
LaunchConfig(grid=(37,), BLOCK_V=1024, num_warps=4)
"""

from __future__ import annotations

from typing import NamedTuple

MAX_GRID_X = 2**31 - 1  # CUDA's limit on grid axis x (y and z stop at 65535)


class LaunchConfig(NamedTuple):
    grid: tuple[int]   # (rows,): one program per token
    BLOCK_V: int       # vocabulary entries per loop step (a power of two)
    num_warps: int


def next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def launch_config(n_rows: int, V: int, itemsize: int, *, kind: str = "forward", block_v: int | None = None,
                  num_warps: int | None = None) -> LaunchConfig:
    """Grid, block and warps for a (n_rows, V) logits tensor of ``itemsize``-byte elements.

    BLOCK_V: 8 KB of logits per load (4096 bf16 or 2048 fp32 numbers), enough bytes in flight per
    program to keep HBM busy, small enough for registers; never beyond the vocabulary. ``block_v``
    overrides it (tests use small blocks to exercise the loop and the ragged last block); ``num_warps``
    too (the GPU benchmark sweeps both).
    """
    if n_rows < 0 or n_rows > MAX_GRID_X:
        raise ValueError(f"n_rows: expected 0..{MAX_GRID_X}, got {n_rows}")
    if V < 1:
        raise ValueError(f"V: expected a positive vocabulary size, got {V}")
    block = block_v if block_v is not None else min(next_pow2(V), 8192 // max(itemsize, 1))
    if block & (block - 1):
        raise ValueError(f"block_v: expected a power of two, got {block}")
    if kind not in ("forward", "backward"):
        raise ValueError(f"kind: expected 'forward' or 'backward', got {kind!r}")
    if num_warps is None:  # measured on an H200 (docs/kernels.md): the reduction prefers fewer warps
        num_warps = (4 if block <= 4096 else 8) if kind == "forward" else (4 if block <= 1024 else 8)
    return LaunchConfig(grid=(n_rows,), BLOCK_V=block, num_warps=num_warps)
