"""The lean decode (``rlnb.models.lean_decode``) against the reference loop (``rlnb.models.generate.sample``).

Not timed (speed lives in scripts/bench_vs_trl.py). Same tokens, masks and truncation flags for the same seed,
greedy and sampled (the lean loop drops finished rows on the reference's schedule, so the generator draws for
the same rows); rollout log-probs to rounding; the sampled distribution against the model's own probabilities.
Irregular shapes: odd batch sizes, prompts of different lengths, rows finishing at different steps, the budget hit.
"""

import pytest
import torch
import transformers as tf

import rlnb
from rlnb.models import generate
from rlnb.models import lean_decode as LD
from rlnb.stages import sample as sample_mod


@pytest.fixture(scope="module")
def default():
    model, tok = rlnb.load_default()
    return model.eval(), tok


def encode(tok, prompts):
    enc = tok(list(prompts), padding=True, return_tensors="pt")
    return enc["input_ids"], enc["attention_mask"]


def both(model, ids, mask, seed=0, **kw):
    """(reference outputs, lean outputs), each from its own generator seeded alike; the lean loop really ran."""
    assert LD.supported(model)
    ref = generate.sample(model, ids, mask, generator=torch.Generator().manual_seed(seed), return_logp=True, **kw)
    lean = LD.sample(model, ids, mask, generator=torch.Generator().manual_seed(seed), return_logp=True, **kw)
    return ref, lean


def assert_same(ref, lean, atol=1e-4):
    for name, a, b in zip(("completion_ids", "mask", "truncated"), ref[:3], lean[:3]):
        assert a.shape == b.shape and torch.equal(a, b), name
    torch.testing.assert_close(lean[3], ref[3], atol=atol, rtol=0)   # another arithmetic order: rounding only
    assert (lean[3][lean[1] == 0] == 0).all()


@pytest.mark.parametrize("greedy", [True, False], ids=["greedy", "sampled"])
@pytest.mark.parametrize("n,G", [(13, 1), (3, 5), (1, 1)], ids=["13 distinct", "3 prompts x 5", "one row"])
def test_same_tokens_as_the_reference(default, greedy, n, G):
    model, tok = default
    base = [" " * (i % 4) + p for i, p in enumerate(rlnb.tasks.get("add").dataset(n, seed=3)["prompt"])]
    prompts = [p for p in base for _ in range(G)]                       # G rows per prompt: the shared prefill
    ids, mask = encode(tok, prompts)
    kw = dict(max_new_tokens=14, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, greedy=greedy,
              temperature=0.8, top_p=0.95)
    ref, lean = both(model, ids, mask, seed=n, **kw)
    assert_same(ref, lean)
    if n > 1:
        lengths = ref[1].sum(-1)
        assert lengths.min() < lengths.max() and mask.sum(-1).min() < mask.sum(-1).max()  # ragged both ways
    if n == 13:
        assert ref[2].any() and not ref[2].all()                        # some rows hit the budget, some end


def test_sampled_tokens_match_over_many_seeds_and_when_every_row_runs_to_the_budget(default):
    model, tok = default
    ids, mask = encode(tok, rlnb.tasks.get("countdown").dataset(9, seed=1)["prompt"])
    kw = dict(max_new_tokens=24, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, temperature=1.3)
    for seed in range(4):
        assert_same(*both(model, ids, mask, seed=seed, **kw))
    ref, lean = both(model, ids, mask, **dict(kw, eos_token_id=-1))  # no id is -1: no EOS
    assert_same(ref, lean)
    assert lean[0].shape[1] == 24 and lean[2].all() and (lean[1] == 1).all()


def test_pad_id_equal_to_eos_id(default):
    model, tok = default
    ids, mask = encode(tok, rlnb.tasks.get("add").dataset(7, seed=5)["prompt"])
    kw = dict(max_new_tokens=12, eos_token_id=tok.eos_token_id, pad_token_id=tok.eos_token_id)
    ref, lean = both(model, ids, mask, **kw)
    assert_same(ref, lean)


def test_sampled_distribution_matches_the_model_probabilities(default):
    """N rows of one prompt, two tokens each: the joint frequencies of (token 1, token 2) against
    p(t1) p(t2 | t1) from full forwards. Tolerance: every pair with p >= 0.01 within 5 standard errors
    (sqrt(p (1 - p) / N)), and total variation over those pairs below 0.05 (its expectation here is about 0.02)."""
    model, tok = default
    N, temp = 4000, 1.5
    ids, mask = encode(tok, ["12+34="] * N)
    out, live, _ = LD.sample(model, ids, mask, max_new_tokens=2, eos_token_id=-1,
                             pad_token_id=tok.pad_token_id, temperature=temp,
                             generator=torch.Generator().manual_seed(11))
    assert (live == 1).all()
    with torch.no_grad():
        p1 = (model(ids[:1]).logits[0, -1] / temp).softmax(-1)                       # (V,)
        firsts = torch.arange(p1.shape[0])
        seq = torch.cat([ids[:1].expand(len(firsts), -1), firsts[:, None]], dim=1)     # every first token
        p2 = (model(seq).logits[:, -1] / temp).softmax(-1)                             # (V, V) p(t2 | t1)
    joint = p1[:, None] * p2                                                           # (V, V)
    freq = torch.zeros_like(joint).index_put_((out[:, 0], out[:, 1]), torch.ones(N), accumulate=True) / N
    big = joint >= 0.01
    assert big.sum() >= 5                                                              # a real spread to test
    se = (joint * (1 - joint) / N).sqrt()
    assert ((freq - joint).abs()[big] <= 5 * se[big]).all()
    assert 0.5 * (freq - joint).abs()[big].sum() < 0.05


def tiny_hf(arch: str, vocab: int):
    """A small random decoder of another family: grouped-query attention, biases (Qwen2), q/k norms (Qwen3)."""
    common = dict(vocab_size=vocab, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16, max_position_embeddings=128, tie_word_embeddings=False)
    torch.manual_seed(0)
    cls = {"llama": (tf.LlamaForCausalLM, tf.LlamaConfig), "qwen2": (tf.Qwen2ForCausalLM, tf.Qwen2Config),
           "qwen3": (tf.Qwen3ForCausalLM, tf.Qwen3Config)}[arch]
    return cls[0](cls[1](**common)).eval()


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3"])
def test_other_hugging_face_families_with_grouped_query_attention(default, arch):
    _, tok = default
    model = tiny_hf(arch, len(tok))
    ids, mask = encode(tok, rlnb.tasks.get("add").dataset(6, seed=2)["prompt"])
    for greedy in (True, False):
        kw = dict(max_new_tokens=10, eos_token_id=5, pad_token_id=tok.pad_token_id, greedy=greedy)  # '5' is common
        assert_same(*both(model, ids, mask, **kw))


def test_unsupported_models_take_the_reference_and_bad_input_is_refused_alike(default, monkeypatch):
    model, tok = default
    ids, mask = encode(tok, ["1+1=", "22+3="])
    kw = dict(max_new_tokens=4, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, greedy=True)
    calls = []
    monkeypatch.setattr(LD, "_decode", lambda *a, **k: calls.append(1))
    model.train()
    try:
        assert not LD.supported(model)                                  # dropout: the model's own forward
        out = LD.sample(model, ids, mask, **kw)
    finally:
        model.eval()
    assert calls == [] and out[0].shape[0] == 2 and out[0].shape[1] <= 4
    with pytest.raises(ValueError, match="temperature"):
        LD.sample(model, ids, mask, **dict(kw, temperature=0.0))
    with pytest.raises(ValueError, match="max_new_tokens"):
        LD.sample(model, ids, mask, **dict(kw, max_new_tokens=0))


def test_diverged_weights_raise_naming_the_rows(default):
    model, tok = default
    import copy
    bad = copy.deepcopy(model)
    with torch.no_grad():
        bad.model.norm.weight.fill_(float("nan"))
    ids, mask = encode(tok, ["1+1=", "22+3="])
    with pytest.raises(ValueError, match=r"logits: NaN or inf .* rows \[0, 1\]"):
        LD.sample(bad, ids, mask, max_new_tokens=3, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)


def test_the_sampler_decodes_through_the_lean_loop(monkeypatch):
    calls = []
    real = LD._decode
    monkeypatch.setattr(LD, "_decode", lambda *a, **k: calls.append(1) or real(*a, **k))
    trainer = rlnb.Trainer.tiny("grpo", prompts_per_step=2, num_generations=3, max_new_tokens=6)
    batch = trainer.sampler.step(trainer.next_prompts())
    assert calls == [1] and sample_mod.sample is LD.sample and batch.completion_ids.shape[0] == 6


def test_a_wrapped_forward_or_a_hook_sends_the_model_to_the_reference(default):
    """A forward replaced on the instance (other than rlnb's autocast option, which the lean loop runs under: see
    tests/test_mixed_precision.py); a hook on a layer would be skipped by the lean loop (it calls the layer's
    parts, not the layer): both take the reference, which calls them."""
    import types

    model, _ = default
    assert LD.supported(model)
    model.forward = types.MethodType(type(model).forward, model)
    try:
        assert not LD.supported(model)
    finally:
        del model.forward
    handle = model.get_decoder().layers[1].register_forward_hook(lambda *a: None)
    try:
        assert not LD.supported(model)
    finally:
        handle.remove()
    assert LD.supported(model)


def test_a_bf16_rollout_under_autocast_runs_and_stays_close_to_the_reference():
    trainer = rlnb.Trainer.tiny("grpo", prompts_per_step=3, num_generations=4, max_new_tokens=10)
    trainer.sampler.rollout_bf16 = True
    batch = trainer.sampler.step(trainer.next_prompts())
    m = batch.mask.bool()
    assert (batch.rollout_logp[m] < 0).all() and (batch.rollout_logp - batch.old_logp).abs()[m].max() < 0.1



def test_the_fused_step_and_the_module_step_agree(default, monkeypatch):
    """Plain Llama/Qwen2 layers take the fused step (q, k, v in one matmul, gate and up in one); Qwen3 (per-head
    q/k norms) and hooked projections take the step that calls the modules. Both give the reference's tokens."""
    model, tok = default
    assert LD.fusable(model) and LD.fusable(tiny_hf("qwen2", len(tok))) and not LD.fusable(tiny_hf("qwen3", len(tok)))
    handle = model.get_decoder().layers[0].mlp.up_proj.register_forward_hook(lambda *a: None)
    try:
        assert not LD.fusable(model) and LD.supported(model)            # the module step calls up_proj: hooks fire
    finally:
        handle.remove()
    ids, mask = encode(tok, rlnb.tasks.get("add").dataset(10, seed=4)["prompt"])
    kw = dict(max_new_tokens=12, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, return_logp=True)
    fused = LD.sample(model, ids, mask, generator=torch.Generator().manual_seed(2), **kw)
    monkeypatch.setattr(LD, "fusable", lambda m: False)
    plain = LD.sample(model, ids, mask, generator=torch.Generator().manual_seed(2), **kw)
    assert_same(plain, fused)
