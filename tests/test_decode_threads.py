"""The decode's thread rule (``rlnb.models.threads``): one thread where the matmuls are small, by shapes only.

Not timed (the measurements are in the module's doc and scripts/bench_vs_trl.py). Checked: the rule's arithmetic on
the default's shape and a wider one, that both decode loops (the lean one and the reference) run on the rule's
thread count and give torch's setting back afterwards, also when the decode raises, and that a setting of one thread
is never raised.
"""

import contextlib

import pytest
import torch
import transformers as tf

import rlnb
from rlnb.core.forward_options import using
from rlnb.models import generate
from rlnb.models import lean_decode as LD
from rlnb.models import threads as TH


@pytest.fixture(scope="module")
def default():
    model, tok = rlnb.load_default()
    return model.eval(), tok


@pytest.fixture(autouse=True)
def passive_waits(monkeypatch):
    """The rule as under rlnb's default waits, whatever this test run's environment says."""
    monkeypatch.setattr(TH, "SPINNING", False)


@contextlib.contextmanager
def torch_threads(n):
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def wide_llama(tok, hidden=512, layers=1, kv_heads=4):
    cfg = tf.LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=4 * hidden, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=kv_heads, max_position_embeddings=64,
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    return tf.LlamaForCausalLM(cfg).eval()


def test_widest_matmul_of_the_default_is_gate_and_up(default):
    model, _ = default
    cfg = model.config                                                   # hidden 128, MLP 512, 4 heads of 32, V 100
    assert TH.widest_matmul_flops(cfg, 128) == 2 * 128 * 128 * (2 * 512)  # 33.5 MFLOP: below the threshold
    assert TH.widest_matmul_flops(cfg, 256) == 2 * TH.widest_matmul_flops(cfg, 128)


def test_rule_by_shape(default):
    model, tok = default
    with torch_threads(2):
        assert TH.decode_threads(model, 128, torch.device("cpu")) == 1
        assert TH.decode_threads(wide_llama(tok), 128, torch.device("cpu")) == 2   # 2 x 128 x 512 x 2048: 268 MFLOP
        assert TH.decode_threads(model, 10_000, torch.device("cpu")) == 2         # many rows: wide enough
        assert TH.decode_threads(model, 128, torch.device("cuda")) == 2           # a GPU's threads are not torch's


def test_spinning_waits_keep_the_setting(default, monkeypatch):
    model, _ = default
    monkeypatch.setattr(TH, "SPINNING", True)                           # GOMP_SPINCOUNT set when torch loaded
    with torch_threads(2):
        assert TH.decode_threads(model, 128, torch.device("cpu")) == 2


@pytest.mark.parametrize(("env", "spins"), [({}, False), ({"OMP_WAIT_POLICY": "PASSIVE"}, False),
                                            ({"OMP_WAIT_POLICY": "active"}, True),
                                            ({"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "10000"}, True),
                                            ({"OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": "0"}, False),
                                            ({"GOMP_SPINCOUNT": "10k"}, True), ({"GOMP_SPINCOUNT": "infinite"}, True),
                                            ({"GOMP_SPINCOUNT": "nonsense"}, False)])
def test_spinning_reads_the_environment_as_gnu_openmp_does(env, spins):
    assert TH.spinning(env) is spins


def test_block_gives_the_setting_back_also_on_error():
    with torch_threads(2):
        with pytest.raises(RuntimeError, match="boom"):
            with TH.threads(1):
                assert torch.get_num_threads() == 1
                raise RuntimeError("boom")
        assert torch.get_num_threads() == 2
        with TH.threads(3):                                              # never more than the setting
            assert torch.get_num_threads() == 2


def spy_threads(module):
    """Record torch's thread count each time ``module`` runs."""
    seen = []
    handle = module.register_forward_pre_hook(lambda *a: seen.append(torch.get_num_threads()))
    return seen, handle


@pytest.mark.parametrize("loop", ["lean", "reference"])
def test_both_loops_decode_on_one_thread_and_give_the_setting_back(default, loop):
    model, tok = default
    ids, mask = (x.repeat(64, 1) for x in tok(["1+2=", "10+20="], padding=True, return_tensors="pt").values())
    fn = LD.sample if loop == "lean" else generate.sample
    seen, handle = spy_threads(model.get_decoder().embed_tokens)          # prefill and every step embed tokens
    try:
        with torch_threads(2):
            assert LD.supported(model)
            out = fn(model, ids, mask, max_new_tokens=6, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                     generator=torch.Generator().manual_seed(0))
            assert torch.get_num_threads() == 2
    finally:
        handle.remove()
    assert out[0].shape[0] == 128 and len(seen) >= 2 and set(seen) == {1}


def test_error_inside_the_decode_gives_the_setting_back(default):
    model, tok = default
    ids, mask = (x.repeat(64, 1) for x in tok(["1+2=", "10+20="], padding=True, return_tensors="pt").values())

    def fail(*a):
        raise RuntimeError("boom in the decode")
    handle = model.get_decoder().embed_tokens.register_forward_pre_hook(fail)
    try:
        with torch_threads(2):
            with pytest.raises(RuntimeError, match="boom in the decode"):
                LD.sample(model, ids, mask, max_new_tokens=6, eos_token_id=tok.eos_token_id,
                          pad_token_id=tok.pad_token_id)
            assert torch.get_num_threads() == 2                          # not the decode's one thread
    finally:
        handle.remove()


def test_wide_model_keeps_the_setting(default):
    _, tok = default
    model = wide_llama(tok)
    ids, mask = (x.repeat(64, 1) for x in tok(["1+2=", "10+20="], padding=True, return_tensors="pt").values())
    seen, handle = spy_threads(model.get_decoder().embed_tokens)
    try:
        with torch_threads(2), using(rows="whole"):                     # one call: the thread rule alone
            LD.sample(model, ids, mask, max_new_tokens=3, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                      generator=torch.Generator().manual_seed(0))
    finally:
        handle.remove()
    assert set(seen) == {2}
