"""A run folder belongs to one process at a time: ``rlnb train`` locks ``--out`` while it writes there.

Two ``rlnb train`` on one ``--out`` (or two ``--resume`` of one run) would interleave ``metrics.jsonl`` and
race the checkpoint renames; the second is refused by name instead. The lock is an OS advisory lock
(``fcntl.flock`` on the folder), so a process that dies (SIGKILL included) releases it; a ``.lock`` file it
leaves behind only holds its pid.
Where ``fcntl`` does not exist (Windows) the folder is not locked.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

LOCK = ".lock"


@contextlib.contextmanager
def run_lock(out: Path, flag: str = "--out"):
    """Hold ``out``'s lock for the block; ``ValueError`` naming ``flag`` when another process holds it.

    The lock is taken on the folder itself, so a refused command leaves the folder as it was; the holder's
    pid sits in ``<out>/.lock`` while it runs, for the refusal to name."""
    if fcntl is None:
        yield
        return
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = (out / LOCK).read_text().strip() or "?"
            except OSError:
                holder = "?"
            raise ValueError(f"{flag}: {out} is in use by another rlnb train (pid {holder}); wait for it to "
                             "finish or stop it, or choose another folder") from None
        (out / LOCK).write_text(str(os.getpid()))
        try:
            yield
        finally:
            (out / LOCK).unlink(missing_ok=True)
    finally:
        os.close(fd)  # closing the descriptor releases the lock
