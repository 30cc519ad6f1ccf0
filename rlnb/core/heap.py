"""Freed memory stays with the process (glibc's malloc), so a step's tensors reuse pages already mapped.

glibc hands a freed block above its mmap threshold back to the kernel at once, and gives back the heap's free top
above its trim threshold; both thresholds start small and rise as big blocks are freed. A training step frees its
activations and allocates them again the next step, and what went back comes back as fresh pages: a page fault and
a zeroed page each. Measured on the benchmark's 2-core machine (AMD EPYC, the embedded default, GRPO at 16 x 8):
the update's forward took about 7600 page faults and 15 ms of system time per step; one 64-row part's forward and
graph took 74-83 ms with glibc's own thresholds and 61-63 ms with these (alternated, one thread).

``keep_freed_memory`` fixes the mmap threshold at glibc's largest (32 MB: bigger blocks still go back at once) and
the trim threshold at 512 MB (the heap keeps up to that much free memory for the next step): the process's memory
stays near its peak between steps instead of falling and being faulted in again. ``import rlnb`` calls it, as it sets
the OpenMP wait policy; the decode worker process imports rlnb too. A malloc setting of your own in the environment
(``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``, or ``glibc.malloc`` in ``GLIBC_TUNABLES``, read by glibc when
the process started) wins; off glibc (macOS, Windows, musl) nothing changes. It never changes a number.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Mapping

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
MMAP_THRESHOLD = 32 << 20                     # glibc's upper bound for it on 64-bit
TRIM_THRESHOLD = 512 << 20                    # not measured: free memory above this still goes back
OWN_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")

_DONE: dict[str, bool] = {}  # "kept": whether ``keep_freed_memory`` succeeded in this process


def kept() -> bool:
    """Whether this process keeps freed memory (``keep_freed_memory`` succeeded)."""
    return _DONE.get("kept", False)


def own_setting(environ: Mapping[str, str]) -> bool:
    """Whether the environment carries a malloc setting of its own, which glibc read when the process started.

    >>> own_setting({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"}), own_setting({"HOME": "/root"})
    (True, False)
    """
    return any(k in environ for k in OWN_SETTINGS) or "glibc.malloc" in environ.get("GLIBC_TUNABLES", "")


def keep_freed_memory(environ: Mapping[str, str] = os.environ) -> bool:
    """Fix glibc's thresholds (see the module doc); True where this process now keeps freed memory."""
    if not sys.platform.startswith("linux") or own_setting(environ):
        return False
    if kept():
        return True
    try:
        libc = ctypes.CDLL(None)
        if not hasattr(libc, "gnu_get_libc_version"):                   # glibc only (musl has no such symbol)
            return False
    except (OSError, AttributeError):
        return False
    _DONE["kept"] = bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return kept()
