"""The decode worker process (rlnb.models.decode_worker) against the same decode on threads.

Not timed (scripts/bench_vs_trl.py and python -m rlnb.bench rows time it). Checked: the worker's rows get the
tokens, log-probs and masks the threads give, bit for bit, sampling at several settings and greedy; a worker that
dies mid-decode costs nothing but time (the decode runs again on threads from the same generator state, and the
next decode starts another worker); an interrupted decode stops the worker; bad logits in its rows are reported
by batch row; the rule for when it applies; the worker process loads no transformers and leaves no file behind.
"""

import os
import subprocess
import sys

import pytest
import torch

import rlnb
from rlnb.core.forward_options import using
from rlnb.models import decode_step as DS
from rlnb.models import decode_worker as DW
from rlnb.models import lean_decode as LD
from rlnb.models import lean_prefill
from rlnb.models import split_decode as SD
from rlnb.models.precision import enable_autocast
from tests.test_decode_threads import wide_llama


def prompts(tok, n):
    texts = [f"{i}+{2 * i + 1}=" for i in range(n)]
    ids, mask = tok(texts, padding=True, return_tensors="pt").values()
    return ids.repeat_interleave(4, 0), mask.repeat_interleave(4, 0)   # groups of 4 rows share a prompt


def decode(model, tok, ids, mask, worker: bool, rows="split", seed=3, expect=None, **kw):
    """(tokens, mask, truncated, log-probs), with the worker allowed (it must then play the second part, or not
    where ``expect`` is False) or on threads."""
    started = []
    real = DW.start

    def start(*a, **k):
        remote = real(*a, **k) if worker else None
        started.append(remote is not None)
        return remote

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(DW, "start", start)
        with using(rows=rows):
            out = LD.sample(model, ids, mask, max_new_tokens=12, eos_token_id=tok.eos_token_id,
                            pad_token_id=tok.pad_token_id, generator=torch.Generator().manual_seed(seed),
                            return_logp=True, **kw)
    want = expect if isinstance(expect, list) else [worker if expect is None else expect]
    assert started == want or rows == "whole"
    return out


@pytest.fixture
def default(two_threads):
    model, tok = rlnb.load_default()
    model.eval()
    assert DW.ready(), "the decode worker did not start"
    return model, tok


@pytest.fixture
def eight(default):
    """(model, tok, ids, mask, the threads' decode of them): 8 prompts of 4 rows, 16 rows a part."""
    model, tok = default
    ids, mask = prompts(tok, 8)
    return model, tok, ids, mask, decode(model, tok, ids, mask, False)


def same(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("n,kw", [(12, {}), (12, {"temperature": 1.7}), (12, {"temperature": 0.8, "top_p": 0.9}),
                                  (12, {"greedy": True}), (4, {})])
def test_the_worker_gives_the_tokens_the_threads_give(default, n, kw):
    """Bit for bit, log-probs too: n prompts of 4 rows (48 rows, 24 a part; 16 rows, 8 a part, where a part's
    prefill of 2 prompts rounds otherwise than one of 4 prompts: each part prefills its own, on threads too)."""
    model, tok = default
    ids, mask = prompts(tok, n)
    on_threads = decode(model, tok, ids, mask, False, **kw)
    in_worker = decode(model, tok, ids, mask, True, **kw)
    whole = decode(model, tok, ids, mask, False, rows="whole", **kw)
    lengths = on_threads[1].sum(-1)
    assert lengths.min() < lengths.max()                               # rows left the batch at different steps
    assert same(in_worker, on_threads)                                   # log-probs too, bit for bit
    assert same(in_worker[:3], whole[:3])
    torch.testing.assert_close(in_worker[3], whole[3], rtol=0, atol=1e-5)


def test_a_worker_that_dies_mid_decode_costs_only_time(eight, monkeypatch):
    model, tok, ids, mask, want = eight
    first = DW.KEEPER.worker
    real = DW.RemotePart.receive

    def receive(self):
        if self.worker.proc.poll() is None and len(self) < 16:            # after the first drop
            self.worker.proc.kill()
            self.worker.proc.wait()
        return real(self)

    monkeypatch.setattr(DW.RemotePart, "receive", receive)
    calls = []
    real_sample = LD._sample
    monkeypatch.setattr(LD, "_sample", lambda *a, **k: calls.append(k["use_worker"]) or real_sample(*a, **k))
    got = decode(model, tok, ids, mask, True, expect=[True, False])      # again on threads, same generator state
    assert same(got, want) and calls == [True, False] and first.proc.returncode is not None
    monkeypatch.setattr(DW.RemotePart, "receive", real)
    assert DW.ready() and DW.KEEPER.worker is not first                  # a new worker for the next decode
    assert same(decode(model, tok, ids, mask, True), want)


def test_an_interrupted_decode_stops_the_worker(eight, monkeypatch):
    model, tok, ids, mask, want = eight
    worker = DW.KEEPER.worker
    real = SD.Part.advance

    def advance(self, t, *a):
        if t == 3:
            raise KeyboardInterrupt
        return real(self, t, *a)

    monkeypatch.setattr(SD.Part, "advance", advance)
    with pytest.raises(KeyboardInterrupt):
        decode(model, tok, ids, mask, True)
    assert worker.proc.returncode is not None and DW.KEEPER.worker is not worker
    monkeypatch.setattr(SD.Part, "advance", real)
    assert DW.ready()
    assert same(decode(model, tok, ids, mask, True), want)


def test_bad_logits_in_the_workers_rows_name_their_batch_rows(default, monkeypatch):
    """NaN in the rotary angles of batch rows 20 and 27 (in the worker's part, which gets its angles from here)
    from step 3 on: the error names those batch rows."""
    model, tok = default
    ids, mask = prompts(tok, 8)                                          # 32 rows: the worker's are 16..31
    real = lean_prefill.decode_angles

    def angles(model, prompt_ids, pos, T, dtype):
        cos, sin = real(model, prompt_ids, pos, T, dtype)
        if len(prompt_ids) == 16 and torch.equal(prompt_ids, ids[16:]):
            cos[[4, 11], 3:] = float("nan")
        return cos, sin

    monkeypatch.setattr(lean_prefill, "decode_angles", angles)
    with pytest.raises(ValueError, match=r"rows \[20, 27\]"):
        decode(model, tok, ids, mask, True)


def test_when_the_worker_plays_a_part(default):
    model, tok = default
    ids, mask = prompts(tok, 8)
    w = LD.weights(model, None)
    cpu = torch.device("cpu")
    assert DW.applies(model, w, 32, cpu)
    assert not DW.applies(model, None, 32, cpu)                          # not fusable: the module path
    assert not DW.applies(model, LD.weights(model, torch.bfloat16), 32, cpu)  # under autocast
    assert not DW.applies(model, w, 32, torch.device("meta"))
    wide = wide_llama(tok, 512)
    assert not DW.applies(wide, LD.weights(wide, None), 32, cpu)        # big matmuls: threads pay
    enable_autocast(model, torch.bfloat16)
    decode(model, tok, ids, mask, True, expect=False)                    # under autocast: on threads


def test_worker_errors_come_back_and_it_goes_on(default):
    worker = DW.acquire()
    assert worker is not None
    try:
        with pytest.raises(DW.WorkerFailed, match="decode worker failed"):
            worker.ask({"op": "step", "t": 0, "drop": False, "noise": False})  # no decode begun
        assert worker.ask({"op": "end"}) == {"ok": True}
    finally:
        DW.release(worker, ok=True)


def test_the_worker_process_needs_no_transformers_and_exits_with_its_input():
    code = ("import sys, rlnb.models.decode_process as P; "
            "print(sorted(m for m in ('transformers', 'rlnb.models.tiny') if m in sys.modules))")
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.stdout.strip() == "[]", out.stderr
    proc = subprocess.Popen([sys.executable, "-m", "rlnb.models.decode_process"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=env)
    assert DW.recv(proc.stdout.fileno()) == {"ready": True}
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0


def test_the_shared_file_is_gone_once_the_worker_has_mapped_it(default):
    model, tok = default
    ids, mask = prompts(tok, 8)
    DW.KEEPER.worker.stop()                                                    # a fresh worker maps a fresh file
    assert DW.ready()
    decode(model, tok, ids, mask, True)
    path = DW.KEEPER.worker.shared.path
    assert path and not os.path.exists(path)


def test_an_idle_worker_exits_and_the_next_decode_starts_another():
    from rlnb.models import decode_process as P
    r, w = os.pipe()
    back_r, back_w = os.pipe()
    try:
        done = []
        import threading
        t = threading.Thread(target=lambda: done.append(P.serve(r, back_w, idle=0.2)))
        t.start()
        assert P.recv(back_r) == {"ready": True}
        t.join(timeout=10)
        assert done == [None]                                            # returned: no decode began in 0.2 s
    finally:
        for fd in (r, w, back_r, back_w):
            os.close(fd)


def test_no_room_for_the_shared_file_means_threads_from_then_on(eight, monkeypatch):
    from rlnb.models import decode_process as P
    model, tok, ids, mask, want = eight

    def full(fd, nbytes):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(P, "_reserve", full)
    monkeypatch.setattr(DW.KEEPER, "failed", False)                     # back after the test
    monkeypatch.setattr(DW.KEEPER.worker, "shared", None)              # a new file is needed
    assert same(decode(model, tok, ids, mask, True, expect=False), want)
    assert DW.KEEPER.failed and DW.acquire() is None


def test_a_worker_that_dies_before_it_is_ready_is_not_started_again(monkeypatch):
    """A broken environment (the worker cannot import torch): one start, then threads, not one start per decode."""
    started = []

    class Broken:
        def __init__(self):
            started.append(self)
            self.ready = DW.threading.Event()

        def alive(self):
            return False

        def stop(self):
            pass

    monkeypatch.setattr(DW, "Worker", Broken)
    keeper = DW._Keeper()
    assert isinstance(keeper.current(), Broken)
    assert keeper.current() is None and keeper.current() is None and keeper.failed
    assert len(started) == 1


def test_this_process_decodes_its_part_from_the_workers_copy_of_the_weights(default, monkeypatch):
    """One copy of the weights in the cache both cores share: this process's part reads the shared file too."""
    model, tok = default
    ids, mask = prompts(tok, 8)
    steps, real = [], LD.FusedStep
    monkeypatch.setattr(LD, "FusedStep", lambda w, s: steps.append(w) or real(w, s))
    decode(model, tok, ids, mask, True)
    (w,) = steps
    buf = DW.KEEPER.worker.shared.buf
    inside = lambda t: buf.data_ptr() <= t.data_ptr() < buf.data_ptr() + buf.numel()  # noqa: E731
    tensors = [w.embed, w.w_head] + [t for layer in w.layers for t in (layer[1], layer[3][1], layer[5], layer[7][1])]
    assert all(inside(t) for t in tensors)
    fresh = DS.weights(model, None)
    assert all(torch.equal(a, b) for a, b in zip(tensors, [fresh.embed, fresh.w_head] + [
        t for layer in fresh.layers for t in (layer[1], layer[3][1], layer[5], layer[7][1])]))
