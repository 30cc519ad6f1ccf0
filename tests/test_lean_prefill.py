"""The lean decode's prefill from the fused weights (rlnb.models.lean_prefill) against the model's own forward:
keys, values and the last position's logits of left-padded prompts, on the embedded default and on a GQA model
with biases; a padding position's keys and values are finite (the decode's mask hides them, and NaN would not stay
hidden)."""

import pytest
import torch
import transformers as tf

import rlnb
from rlnb.models import lean_prefill
from rlnb.models.decode_step import weights
from rlnb.models.generate import cache_of, position_ids
from rlnb.models.shared_prompt import plain_kv


def gqa_qwen2(tok):
    cfg = tf.Qwen2Config(vocab_size=len(tok), hidden_size=96, intermediate_size=160, num_hidden_layers=2,
                         num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=64,
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    return tf.Qwen2ForCausalLM(cfg).eval()                               # q, k, v with biases


@pytest.mark.parametrize("which", ["default", "qwen2"])
def test_lean_prefill_is_the_models_forward(which):
    model, tok = rlnb.load_default()
    model = model.eval() if which == "default" else gqa_qwen2(tok)
    ids, mask = tok(["1+2=", "31+456=", "7+8=", "123+4567="], padding=True, return_tensors="pt").values()
    assert (mask == 0).any()                                             # left padding
    pos = position_ids(mask)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True)
        want = plain_kv(cache_of(out))
        w = weights(model, None)
        cos, sin = model.get_decoder().rotary_emb(w.embed[None, :1], position_ids=pos)
        layers, logits = lean_prefill.prefill(w, ids, mask, cos, sin)
    real = mask.bool()[:, None, :, None]                                 # (U, 1, Tp, 1) the real positions
    for (k, v), (k_ref, v_ref) in zip(layers, want):
        assert k.shape == k_ref.shape and v.shape == v_ref.shape
        assert torch.isfinite(k).all() and torch.isfinite(v).all()
        torch.testing.assert_close(k * real, k_ref * real, rtol=0, atol=2e-5)
        torch.testing.assert_close(v * real, v_ref * real, rtol=0, atol=2e-5)
    torch.testing.assert_close(logits, out.logits[:, -1], rtol=0, atol=5e-5)


def test_shared_rows_computes_each_prompt_once_where_groups_repeat_it():
    ids = torch.tensor([[5, 6], [5, 6], [0, 7], [0, 7]])
    mask = torch.tensor([[1, 1], [1, 1], [0, 1], [0, 1]])
    sel, rows = lean_prefill.shared_rows(ids, mask)
    assert sel.tolist() == [0, 2] and rows.tolist() == [0, 0, 1, 1]
    sel, rows = lean_prefill.shared_rows(ids[1:], mask[1:])              # 2 of 3 distinct: every row
    assert sel.tolist() == [0, 1, 2] and rows.tolist() == [0, 1, 2]


def test_encode_prompts_tokenizes_each_distinct_prompt_once_to_the_same_ids():
    from rlnb.models.generate import encode_prompts
    _, tok = rlnb.load_default()
    prompts = [p for p in ("1+2=", "31+456=", "7+8=") for _ in range(3)] + ["123+4567="]  # groups, then a single
    calls = []
    real = tok.__call__
    tok_spy = type("Spy", (), {"__call__": lambda self, texts, **kw: calls.append(list(texts)) or real(texts, **kw)})()
    ids, mask = encode_prompts(tok_spy, prompts)
    want = tok(prompts, padding=True, return_tensors="pt")
    assert torch.equal(ids, want["input_ids"]) and torch.equal(mask, want["attention_mask"])
    assert calls == [["1+2=", "31+456=", "7+8=", "123+4567="]]
