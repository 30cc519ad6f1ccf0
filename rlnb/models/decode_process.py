"""The decode worker process (``rlnb.models.decode_worker`` starts and feeds it): the wire, the shared file, and
the loop that plays the second row part of a lean decode.

It imports torch and the decode's own modules only (not ``transformers``), so it is ready in about a second.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import signal
import struct
import sys
import tempfile

import torch
import torch.nn.functional as F

from rlnb.models import lean_prefill
from rlnb.models.decode_step import FusedStep, Weights
from rlnb.models.split_decode import Out, Part

ALIGN = 64  # bytes: every tensor in the shared file starts at a multiple
IDLE_S = 600.0  # not measured: a worker with no decode for this long exits (its ~250 MB RSS back)


# ---------------------------------------------------------------- the wire: length-prefixed JSON on raw pipes


def send(fd: int, msg: dict) -> None:
    data = json.dumps(msg).encode()
    data = struct.pack("<I", len(data)) + data
    while data:
        data = data[os.write(fd, data):]


def recv(fd: int) -> dict:
    """The next message; EOFError where the other side closed."""
    return json.loads(_read(fd, struct.unpack("<I", _read(fd, 4))[0]))


def _read(fd: int, n: int) -> bytes:
    chunks = []
    while n:
        b = os.read(fd, n)
        if not b:
            raise EOFError("the decode worker's pipe closed")
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)


# ---------------------------------------------------------------- the shared file


class Shared:
    """A file both processes map (``torch.from_file(shared=True)``); tensors are carved from it by ``layout``.
    The creator removes the file's name once the worker has mapped it: the mapping outlives the name, and
    nothing is left behind however either process ends."""

    def __init__(self, nbytes: int, path: str | None = None):
        self.created = path is None
        if path is None:
            fd, path = tempfile.mkstemp(prefix="rlnb-decode-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
            try:
                _reserve(fd, nbytes)
            except OSError:
                os.close(fd)
                os.unlink(path)
                raise
            os.close(fd)
        self.path, self.nbytes = path, nbytes
        self.buf = torch.from_file(path, shared=True, size=nbytes, dtype=torch.uint8)

    def unlink(self) -> None:
        if self.created:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            self.created = False

    def views(self, rows: list) -> dict[str, torch.Tensor]:
        """{name: tensor} for ``layout``'s rows of (name, dtype, shape, offset)."""
        out = {}
        for name, dtype, shape, off in rows:
            dt = getattr(torch, dtype)
            n = math.prod(shape) * dt.itemsize
            out[name] = self.buf[off:off + n].view(dt).view(shape)
        return out


def _reserve(fd: int, nbytes: int) -> None:
    """The file's pages now where the system can (``posix_fallocate``): a full /dev/shm then fails here (OSError),
    not with SIGBUS at the first write into a page it cannot give."""
    if hasattr(os, "posix_fallocate"):
        os.posix_fallocate(fd, 0, nbytes)
    else:
        os.ftruncate(fd, nbytes)


def layout(specs: list[tuple[str, torch.dtype, tuple]]) -> tuple[list, int]:
    """(rows of (name, dtype, shape, offset), bytes needed) for ``specs`` of (name, dtype, shape)."""
    rows, off = [], 0
    for name, dtype, shape in specs:
        rows.append((name, str(dtype).removeprefix("torch."), list(shape), off))
        off += -(-math.prod(shape) * dtype.itemsize // ALIGN) * ALIGN
    return rows, off


# ---------------------------------------------------------------- the worker's loop


class Session:
    """One decode's second part, from the shared file's tensors: its rows' prefill, then its steps."""

    def __init__(self, head: dict, shared: Shared):
        torch.set_float32_matmul_precision(head["matmul_precision"])
        v = shared.views(head["layout"])
        H = v["embed"].shape[1]
        layers = []
        for i, (eps1, eps2) in enumerate(head["eps"]):
            w_o, w_d = v[f"w_o{i}"], v[f"w_d{i}"]
            layers.append((((H,), None, eps1), v[f"w_qkv{i}"], v.get(f"b_qkv{i}"), (w_o.t(), w_o, v.get(f"b_o{i}")),
                           ((H,), None, eps2), v[f"w_gu{i}"], F.silu, (w_d.t(), w_d, v.get(f"b_d{i}"))))
        w = Weights(v["embed"], layers, ((H,), None, head["final_eps"]), v["w_head"], v.get("b_head"), head["Hq"],
                    head["Hkv"], head["D"], head["scale"], True)
        ids, mask = v["ids"], v["mask"]
        kv, logits, rows = lean_prefill.prefill_parts(w, ids, mask, v["cos_p"], v["sin_p"], [0, len(ids)])
        s = lean_prefill.state(kv, logits, rows, mask, v["cos_d"], v["sin_d"], head["T"], None)
        self.part = Part(FusedStep(w, s), torch.arange(len(ids)), s.logits)
        self.out = Out.over(v["tokens"], v["logps"], head["eos"], head["pad"])
        self.noise, self.opts = v["noise"], head["opts"]

    def step(self, msg: dict) -> int:
        n = len(self.part) - (self.part.n_done if msg["drop"] else 0)   # its rows after the drop
        noise = self.noise[:n] if msg["noise"] else None
        return self.part.advance(msg["t"], noise, msg["drop"], self.out, self.opts)


def serve(r: int, w: int, idle: float = IDLE_S) -> None:
    """Answer the parent's messages on ``r`` through ``w`` until ``r`` closes, or no decode has begun for ``idle``
    seconds (a notebook left open should not keep a process; the parent starts another when it decodes again)."""
    send(w, {"ready": True})
    shared, session = None, None
    with torch.no_grad():
        while True:
            if session is None and not select.select([r], [], [], idle)[0]:
                return
            try:
                msg = recv(r)
            except EOFError:
                return
            try:
                if msg["op"] == "step":
                    send(w, {"n_done": session.step(msg)})
                elif msg["op"] == "begin":
                    if msg["path"] is not None:                  # a new (larger) file
                        shared = Shared(os.path.getsize(msg["path"]), msg["path"])
                    session = Session(msg, shared)
                    send(w, {"ok": True})
                else:                                                    # "end": the outputs are in the file
                    session = None
                    send(w, {"ok": True})
            except Exception as e:  # noqa: BLE001  reported to the decode that asked; the worker goes on
                session = None
                send(w, {"error": f"{type(e).__name__}: {e}"})


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)                         # a notebook's interrupt is the parent's
    torch.set_num_threads(1)
    w = os.dup(1)                                                        # the answers' pipe; a stray print must
    os.dup2(2, 1)                                                        # not enter it, so stdout goes to stderr
    sys.stdout = sys.stderr
    serve(0, w)


if __name__ == "__main__":
    main()
