"""The lean decode's step as row parts on parallel threads (rlnb.models.split_decode) against one call (rows="whole");
the second part in the decode worker's process is tests/test_decode_worker.py's.

Not timed (python -m rlnb.bench rows times it). Checked on fixed prompts: the same tokens, log-probs and masks as one
call, with rows finishing at different steps (the parts drop their own rows), under the model's autocast, on a wide
model; each part on its own thread with one intra-op thread; and where the split does not apply.
"""

import threading

import pytest
import torch

import rlnb
from rlnb.core.forward_options import using
from rlnb.models import decode_worker as DW
from rlnb.models import lean_decode as LD
from rlnb.models import split_decode as SD
from rlnb.models.precision import enable_autocast
from tests.test_decode_threads import wide_llama


@pytest.fixture(autouse=True)
def on_threads(monkeypatch):
    """Both parts on threads of this process: the decode worker's second part is tests/test_decode_worker.py's."""
    monkeypatch.setattr(DW, "start", lambda *a, **k: None)


def prompts(tok, n):
    texts = [f"{i}+{2 * i + 1}=" for i in range(n)]
    return tok(texts, padding=True, return_tensors="pt").values()


def decode(model, tok, ids, mask, rows, **kw):
    with using(rows=rows):
        return LD.sample(model, ids, mask, max_new_tokens=12, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.pad_token_id, generator=torch.Generator().manual_seed(3), return_logp=True,
                         **kw)


def spy_parts(model):
    """(thread id, torch threads) of every embedding call: the prefill and each part's step."""
    seen = []
    handle = model.get_decoder().embed_tokens.register_forward_pre_hook(
        lambda *a: seen.append((threading.get_ident(), torch.get_num_threads())))
    return seen, handle


@pytest.mark.parametrize("temperature", [1.0, 1.7])
def test_split_decode_gives_the_one_call_tokens(two_threads, temperature):
    model, tok = rlnb.load_default()
    model.eval()
    ids, mask = prompts(tok, 48)
    whole = decode(model, tok, ids, mask, "whole", temperature=temperature)
    assert SD.parts(ids.shape[0], ids.device, "split") == 2
    split = decode(model, tok, ids, mask, "split", temperature=temperature)
    lengths = whole[1].sum(-1)
    assert lengths.min() < lengths.max()                               # rows left the batch at different steps
    assert torch.equal(split[0], whole[0]) and torch.equal(split[1], whole[1]) and torch.equal(split[2], whole[2])
    torch.testing.assert_close(split[3], whole[3], rtol=0, atol=1e-5)


def test_each_part_runs_on_its_own_thread_with_one_intra_op_thread(two_threads, monkeypatch):
    model, tok = rlnb.load_default()
    model.eval()
    ids, mask = prompts(tok, 32)
    calls = []
    real = SD.advance
    monkeypatch.setattr(SD, "advance", lambda parts, *a: calls.append([len(p) for p in parts]) or real(parts, *a))
    monkeypatch.setattr(LD, "fusable", lambda m: False)                 # the module path: its hooks see the parts
    seen, handle = spy_parts(model)
    try:
        decode(model, tok, ids, mask, "split")
    finally:
        handle.remove()
    assert calls and calls[0] == [16, 16]
    assert len({ident for ident, _ in seen}) == 2 and {n for _, n in seen} == {1}
    assert torch.get_num_threads() == 2


def test_split_decode_under_autocast_and_on_a_wide_model(two_threads):
    model, tok = rlnb.load_default()
    model.eval()
    enable_autocast(model, torch.bfloat16)
    ids, mask = prompts(tok, 24)
    for m in (model, wide_llama(tok, 256, layers=2, kv_heads=2)):  # GQA too
        whole, split = decode(m, tok, ids, mask, "whole"), decode(m, tok, ids, mask, "split")
        assert torch.equal(split[0], whole[0])
        torch.testing.assert_close(split[3], whole[3], rtol=0, atol=1e-5)


def test_parts_rule(two_threads):
    cpu = torch.device("cpu")
    assert SD.parts(16, cpu, "split") == 2 and SD.parts(15, cpu, "split") == 1      # 8 rows a part at least
    assert SD.parts(128, cpu, "whole") == 1 and SD.parts(128, torch.device("meta"), "split") == 1
    torch.set_num_threads(1)
    assert SD.parts(128, cpu, "split") == 1


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 1.0), (1.3, 0.8)])
def test_draw_is_torch_multinomials_draw_row_by_row(temperature, top_p):
    """The parts sample with noise drawn once for all rows: the tokens are torch.multinomial's for the same generator,
    whichever rows a part holds, and the generator ends in the same state."""
    from rlnb.models.generate import next_token
    for seed in range(20):
        b = 17 + seed
        logits = torch.randn(b, 50, generator=torch.Generator().manual_seed(100 + seed)) * 3
        g_ref, g_ours = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
        ref = next_token(logits, temperature=temperature, top_p=top_p, greedy=False, generator=g_ref)
        noise = torch.empty(b, 50).exponential_(generator=g_ours)
        h = b // 3
        toks, lps = zip(*[SD.draw(logits[r], noise[r], temperature=temperature, top_p=top_p, greedy=False)
                          for r in (slice(0, h), slice(h, b))])
        assert torch.equal(torch.cat(toks), ref) and torch.equal(g_ours.get_state(), g_ref.get_state())
        want = torch.log_softmax(logits / temperature, -1).gather(-1, ref[:, None])[:, 0]
        torch.testing.assert_close(torch.cat(lps), want, rtol=0, atol=1e-6)
    greedy, _ = SD.draw(logits, None, temperature=2.0, top_p=1.0, greedy=True)
    assert torch.equal(greedy, logits.argmax(-1))


def test_bad_logits_in_one_part_raise_naming_the_batch_rows(two_threads, monkeypatch):
    """NaN in the rotary angles of batch rows 20 and 27 (both in the second part) from step 3 on: their logits go
    NaN, and the error names those batch rows, split or in one call."""
    model, tok = rlnb.load_default()
    model.eval()
    ids, mask = prompts(tok, 32)
    real_split = SD.split

    def split(step, logits, n):
        step.s.cos[[20, 27], 3:] = float("nan")                         # the state of every row, before the parts
        return real_split(step, logits, n)

    monkeypatch.setattr(SD, "split", split)
    for rows in ("split", "whole"):
        with pytest.raises(ValueError, match=r"rows \[20, 27\]"):
            decode(model, tok, ids, mask, rows)


def test_the_noise_is_float32_whatever_the_default_dtype(two_threads, monkeypatch):
    """torch.multinomial draws its noise in the probabilities' dtype, fp32: under a float64 default dtype the parts
    must still get fp32 noise (float64 noise holds the same draws rounded differently, so p / q could tip a near
    tie another way than the reference)."""
    model, tok = rlnb.load_default()
    model.eval()
    ids, mask = prompts(tok, 16)
    seen, real = [], SD.draw
    monkeypatch.setattr(SD, "draw", lambda logits, noise, **kw: seen.append(noise.dtype) or real(logits, noise, **kw))
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        decode(model, tok, ids, mask, "split")
    finally:
        torch.set_default_dtype(before)
    assert seen and set(seen) == {torch.float32}
