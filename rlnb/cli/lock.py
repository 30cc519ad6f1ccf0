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
            holder = _read_pid(out / LOCK)
            raise ValueError(f"{flag}: {out} is in use by another rlnb train (pid {holder}); wait for it to "
                             "finish or stop it, or choose another folder") from None
        _write_pid(out / LOCK, flag)
        try:
            yield
        finally:
            (out / LOCK).unlink(missing_ok=True)
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _write_pid(path: Path, flag: str) -> None:
    """Our pid into ``path``, never through a symlink: a ``.lock`` linked to another file would have that file
    overwritten (O_NOFOLLOW closes the gap between the check and the open)."""
    if path.is_symlink() or (path.exists() and not path.is_file()):
        what = f"a symbolic link (to {os.readlink(path)})" if path.is_symlink() else "not a regular file"
        raise ValueError(f"{flag}: {path} is {what}; rlnb train writes its pid there and never follows a link or "
                         "replaces another kind of file: remove it")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as e:
        raise ValueError(f"{flag}: {path} cannot be written as a plain file ({e.strerror}); remove it") from None
    with os.fdopen(fd, "w") as f:
        f.write(str(os.getpid()))


def _read_pid(path: Path) -> str:
    """The holder's pid as written in ``path`` ("?" when it cannot be read; a link is not followed)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return "?"
    with os.fdopen(fd) as f:
        return f.read(32).strip() or "?"
