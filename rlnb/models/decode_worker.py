"""A second process for the lean decode's second row part, where a decode step is too small for threads to pay.

A decode step of the embedded default is about a hundred operators of tens of microseconds each. Two row parts on
two threads of one process (``rlnb.models.split_decode``) hand Python's lock over at nearly every operator; two
processes have a lock each. Measured on the benchmark's 2-core machine (AMD EPYC, passive waits, the embedded
default, 64-row decodes of 32 tokens): 0.09-0.10 s alone, 0.13-0.17 s each as two threads of one process,
0.10-0.11 s each as two processes meeting once per token.

So on a CPU where the decode's rows run as two parts and its matmuls are small (``applies``), this process keeps
one worker (``python -m rlnb.models.decode_process``), started on the first such decode without waiting for it;
that decode, and any while the worker starts or serves another decode, runs both parts on threads: the same
tokens. The worker plays the last rows' part with the code the calling thread runs for the first: it prefills
its rows' prompts (``lean_prefill``) while this thread prefills the first part's, then steps them
(``split_decode.Part``, ``decode_step.FusedStep``, one intra-op thread each), so every row's numbers are the ones
the threads compute (tests compare them bit for bit).

Nothing large crosses the pipe. Both processes map one file (``decode_process.Shared``: in ``/dev/shm`` where
there is one). Per decode this process writes into it the fused weights (they change with every update) and the
worker's prompts, padding and rotary angles; per step the sampler's noise for the worker's rows
(``split_decode.draw``). The worker writes its rows' tokens and log-probs there. The pipes carry one small message
each way per step: the step, whether done rows leave, and how many of the worker's rows are done.

The worker exits when its input closes (this process ended, however it ended) and ignores SIGINT (a notebook's
interrupt is this process's). A decode interrupted or failed while the worker holds a part stops the worker; the
next decode starts another. A worker that dies during a decode fails that decode with ``WorkerFailed``, and
``lean_decode.sample`` runs it again on threads from the same generator state.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import sys
import threading

import torch

from rlnb.models import lean_prefill, split_decode
from rlnb.models.decode_process import Shared, layout, recv, send
from rlnb.models.decode_step import Weights
from rlnb.models.generate import position_ids
from rlnb.models.split_decode import Out


class WorkerFailed(RuntimeError):
    """The worker died or answered with an error during a decode."""


# ---------------------------------------------------------------- the worker process, from this side


class Worker:
    """The worker process, its pipes and its shared file; ``ready`` once it has loaded torch."""

    def __init__(self):
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
        env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "rlnb.models.decode_process"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env, bufsize=0, start_new_session=True)
        self.w, self.r = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        self.lock, self.ready = threading.Lock(), threading.Event()
        self.shared: Shared | None = None
        threading.Thread(target=self._wait_ready, daemon=True, name="rlnb-decode-worker-start").start()

    def _wait_ready(self) -> None:
        try:
            if recv(self.r).get("ready"):
                self.ready.set()
        except (EOFError, OSError, ValueError):
            pass

    def alive(self) -> bool:
        return self.proc.poll() is None

    def ask(self, msg: dict) -> dict:
        """Send ``msg`` and return the answer; ``WorkerFailed`` where the worker died or reported an error."""
        self.tell(msg)
        return self.answer()

    def tell(self, msg: dict) -> None:
        try:
            send(self.w, msg)
        except OSError as e:
            raise WorkerFailed(f"the decode worker stopped ({e})") from None

    def answer(self) -> dict:
        try:
            reply = recv(self.r)
        except (EOFError, OSError, ValueError) as e:
            raise WorkerFailed(f"the decode worker stopped ({e})") from None
        if "error" in reply:
            raise WorkerFailed(f"the decode worker failed: {reply['error']}")
        return reply

    def stop(self) -> None:
        """Close its input (it exits) and make sure it has gone."""
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        if self.shared is not None:
            self.shared.unlink()


class _Keeper:
    """This process's one worker: started on first use, replaced when it died after it had been ready (an idle
    exit, a kill); where starting fails, or a worker dies before it is ready (a broken environment), never again,
    so no decode pays for starting one; a lock so that two decodes at once (a lab's race) start one worker."""

    def __init__(self):
        self.worker: Worker | None = None
        self.failed = False
        self.lock = threading.Lock()

    def current(self) -> Worker | None:
        with self.lock:
            if self.worker is not None and not self.worker.alive():
                self.failed = self.failed or not self.worker.ready.is_set()
                self.worker.stop()
                self.worker = None
            if self.worker is None and not self.failed:
                try:
                    self.worker = Worker()
                except OSError:
                    self.failed = True
            return self.worker

    def drop(self, worker: Worker) -> None:
        worker.stop()
        with self.lock:
            if self.worker is worker:
                self.worker = None


KEEPER = _Keeper()


def acquire() -> Worker | None:
    """The worker if it is ready and free (then held until ``release``), else None (then the decode runs both
    parts on threads); the first call starts it without waiting."""
    w = KEEPER.current()
    if w is None or not w.ready.is_set() or not w.lock.acquire(blocking=False):
        return None
    return w


def ready(timeout: float = 60.0) -> bool:
    """Start the worker if there is none and wait until it is ready (tests, benchmarks); True when it is."""
    w = KEEPER.current()
    return w is not None and w.ready.wait(timeout)


def release(worker: Worker, ok: bool) -> None:
    """Give the worker back; after a decode that did not end cleanly, stop it (its pipe may hold half a step)."""
    if not ok:
        KEEPER.drop(worker)
    worker.lock.release()


@atexit.register
def _stop_at_exit() -> None:
    if KEEPER.worker is not None:
        KEEPER.worker.stop()


def applies(model, w, rows: int, device: torch.device) -> bool:
    """True where the second part can go to the worker: a POSIX system, fused weights that fold the norms (fp32,
    no autocast) on a CPU, a SiLU MLP (the worker's), and small matmuls (``threads.ONE_THREAD_FLOPS``: bigger ones
    pay on threads)."""
    from rlnb.models.threads import ONE_THREAD_FLOPS, widest_matmul_flops
    if os.name != "posix" or w is None or not w.fold or device.type != "cpu" or w.embed.dtype != torch.float32:
        return False
    if any(type(layer[6]).__name__ not in ("SiLU", "SiLUActivation") for layer in w.layers):
        return False
    return widest_matmul_flops(model.config, rows) < ONE_THREAD_FLOPS


def start(model, w, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, n_parts: int, T: int, opts: dict,
          eos: int, pad: int) -> RemotePart | None:
    """The decode's second row part, started in the worker (it prefills its rows while this thread prefills the
    first part's), where there are two parts, the decode ``applies`` and the worker is ready and free; else None.
    Hold it in ``held``."""
    if n_parts != 2 or not applies(model, w, len(prompt_ids), prompt_ids.device):
        return None
    worker = acquire()
    if worker is None:
        return None
    try:
        return RemotePart(worker, model, w, prompt_ids, prompt_mask, T, opts, eos, pad)
    except OSError:                                                      # no shared file here: threads from now on
        release(worker, ok=False)
        KEEPER.failed = True
        return None
    except BaseException:
        release(worker, ok=False)
        raise


@contextlib.contextmanager
def held(remote: RemotePart | None):
    """Within the block the worker plays ``remote``; after it the worker is free again, or stopped where the
    decode did not finish (its pipe may hold half a step)."""
    if remote is None:
        yield
        return
    try:
        yield
    finally:
        release(remote.worker, remote.finished)


class RemotePart:
    """``split_decode.Part``'s role for the decode's last rows, played by the worker: rows ``lo:`` of the batch."""

    remote = True

    def __init__(self, worker: Worker, model, w, ids: torch.Tensor, mask: torch.Tensor, T: int, opts: dict,
                 eos: int, pad: int):
        B = len(ids)
        self.lo = split_decode.edges(B, 2)[1]
        self.worker, self.n, self.n_done, self.begun, self.finished = worker, B - self.lo, 0, False, False
        ids, mask = ids[self.lo:], mask[self.lo:].long()
        pos = position_ids(mask)
        cos_p, sin_p = model.get_decoder().rotary_emb(w.embed[None, :1], position_ids=pos)  # (n, Tp, D) each
        cos_d, sin_d = lean_prefill.decode_angles(model, ids, pos, T, w.embed.dtype)       # (n, T, D) each
        tensors = {"embed": w.embed, "w_head": w.w_head, "b_head": w.b_head, "ids": ids, "mask": mask,
                   "cos_p": cos_p, "sin_p": sin_p, "cos_d": cos_d, "sin_d": sin_d}
        for i, (_, w_qkv, b_qkv, o, _, w_gu, _, d) in enumerate(w.layers):
            tensors.update({f"w_qkv{i}": w_qkv, f"b_qkv{i}": b_qkv, f"w_o{i}": o[1], f"b_o{i}": o[2],
                            f"w_gu{i}": w_gu, f"w_d{i}": d[1], f"b_d{i}": d[2]})
        tensors = {k: v for k, v in tensors.items() if v is not None}
        V = w.w_head.shape[0]
        specs = [(k, v.dtype, tuple(v.shape)) for k, v in tensors.items()]
        specs += [("noise", torch.float32, (self.n, V)), ("tokens", torch.long, (self.n, T)),
                  ("logps", torch.float32, (self.n, T))]
        rows, nbytes = layout(specs)
        grown = worker.shared is None or worker.shared.nbytes < nbytes
        if grown:
            worker.shared = Shared(nbytes + nbytes // 2)                  # room for a somewhat larger next decode
        self.views = v = worker.shared.views(rows)
        for k, x in tensors.items():
            v[k].copy_(x)
        v["tokens"].fill_(pad)
        v["logps"].zero_()
        worker.tell({"op": "begin", "layout": rows, "path": worker.shared.path if grown else None, "Hq": w.Hq,
                     "Hkv": w.Hkv, "D": w.D, "scale": w.scale, "T": T,
                     "eps": [(a[0][2], a[4][2]) for a in w.layers], "final_eps": w.final[2], "opts": opts,
                     "eos": eos, "pad": pad, "matmul_precision": torch.get_float32_matmul_precision()})
        self.grown = grown

    def weights(self, w: Weights) -> Weights:
        """``w`` reading the shared file's copies (the tensors the worker reads): the same values, and one copy of
        the weights in the cache the two cores share instead of two."""
        v = self.views

        def out(name: str, bias: torch.Tensor | None) -> tuple:
            return (v[name].t(), v[name], None if bias is None else v["b" + name[1:]])

        layers = [(n1, v[f"w_qkv{i}"], None if b_qkv is None else v[f"b_qkv{i}"], out(f"w_o{i}", o[2]), n2,
                   v[f"w_gu{i}"], act, out(f"w_d{i}", d[2]))
                  for i, (n1, _, b_qkv, o, n2, _, act, d) in enumerate(w.layers)]
        return w._replace(embed=v["embed"], w_head=v["w_head"], b_head=None if w.b_head is None else v["b_head"],
                          layers=layers)

    def __len__(self) -> int:
        return self.n

    def clear(self) -> None:
        self.n, self.n_done = 0, 0

    def send(self, t: int, noise: torch.Tensor | None, drop: bool) -> None:
        """Step t of the worker's rows, with their rows of the sampler's noise: runs while this thread runs its own
        part; ``receive`` waits for it. The first call first waits for the worker's prefill."""
        if not self.begun:
            self.worker.answer()
            self.begun = True
            if self.grown:
                self.worker.shared.unlink()                              # both have it mapped now
        if drop:
            self.n -= self.n_done
        if noise is not None:
            self.views["noise"][:len(noise)].copy_(noise)
        self.worker.tell({"op": "step", "t": t, "drop": drop, "noise": noise is not None})

    def receive(self) -> int:
        self.n_done = self.worker.answer()["n_done"]
        return self.n_done

    def finish(self, out: Out) -> None:
        """Its rows' tokens and log-probs into ``out``; the worker is free again."""
        self.worker.ask({"op": "end"})
        n = self.views["tokens"].shape[0]
        out.tokens[self.lo:self.lo + n] = self.views["tokens"]
        out.logps[self.lo:self.lo + n] = self.views["logps"]
        self.finished = True
