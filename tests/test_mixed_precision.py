"""Mixed precision on the embedded default (issue 46): fp32 master weights, the forward under bf16 autocast
(``rlnb.models.precision``), reached by ``Trainer.from_pretrained(DEFAULT_DIR, autocast="bf16")``.

Not timed (speed lives in scripts/bench_vs_trl.py --precision bf16). The lean decode runs under the model's
autocast instead of falling back to the reference loop, and gives the reference's tokens under the same autocast;
the update's gradients are fp32's to bf16 rounding; without the option nothing changes.
"""

import copy
import types

import pytest
import torch

import rlnb
from rlnb.models import DEFAULT_DIR, generate
from rlnb.models import lean_decode as LD
from rlnb.models.precision import autocast_dtype, enable_autocast

SMALL = dict(prompts_per_step=4, num_generations=4, max_new_tokens=12)


@pytest.fixture(scope="module")
def mixed():
    model, tok = rlnb.load_default()
    return enable_autocast(model.eval(), torch.bfloat16), tok


def encode(tok, n, G, seed):
    base = [" " * (i % 4) + p for i, p in enumerate(rlnb.tasks.get("add").dataset(n, seed=seed)["prompt"])]
    enc = tok([p for p in base for _ in range(G)], padding=True, return_tensors="pt")
    return enc["input_ids"], enc["attention_mask"]


def test_autocast_dtype_names_rlnb_wrapper_only():
    model, _ = rlnb.load_default()
    assert autocast_dtype(model) is None
    model.forward = types.MethodType(type(model).forward, model)         # replaced, but not by rlnb's option
    assert autocast_dtype(model) is None and not LD.supported(model)
    del model.forward
    enable_autocast(model, torch.bfloat16)
    assert autocast_dtype(model) == torch.bfloat16 and LD.supported(model)
    assert autocast_dtype(copy.deepcopy(model)) == torch.bfloat16        # the Trainer's reference copy too
    del model.get_decoder().forward                                       # half-wrapped: not the option
    assert autocast_dtype(model) is None and not LD.supported(model)


def test_the_lean_loop_runs_under_the_models_autocast_with_weights_cast_once(mixed, monkeypatch):
    model, tok = mixed
    seen = []
    real = LD.FusedStep.__init__

    def spy(self, w, s):
        real(self, w, s)
        seen.append((torch.is_autocast_enabled("cpu"), s.half, w.layers[0][1].dtype, s.kv[0][0].dtype))

    monkeypatch.setattr(LD.FusedStep, "__init__", spy)
    ids, mask = encode(tok, 3, 2, seed=1)
    LD.sample(model, ids, mask, max_new_tokens=6, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    assert seen == [(True, torch.bfloat16, torch.bfloat16, torch.float32)]  # fp32 cache of bf16-rounded k, v
    plain, _ = rlnb.load_default()
    LD.sample(plain.eval(), ids, mask, max_new_tokens=6, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    assert seen[1] == (False, None, torch.float32, torch.float32)          # fp32: nothing cast


@pytest.mark.parametrize("n,G,seed", [(13, 1, 3), (3, 5, 3), (16, 8, 1)], ids=["13 distinct", "3x5", "16x8"])
def test_greedy_tokens_equal_the_reference_under_the_same_autocast(mixed, n, G, seed):
    """Same tokens, masks and truncation flags greedy. Log-probs: the lean loop does attention as the model's
    ``scaled_dot_product_attention`` does under autocast (bf16-rounded q, k, v; fp32 accumulation) but in
    another order, and the logits are bf16 (spacing 2^-7 of their size: up to 0.125 at |z| >= 16), so each
    rollout log-prob is within 0.25 (two such steps) and their mean gap below 0.01. For scale: the reference's
    own incremental log-probs differ from its full forward by up to 0.07 on these rows."""
    model, tok = mixed
    ids, mask = encode(tok, n, G, seed)
    kw = dict(max_new_tokens=20, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, greedy=True,
              return_logp=True)
    ref = generate.sample(model, ids, mask, **kw)
    lean = LD.sample(model, ids, mask, **kw)
    for name, a, b in zip(("completion_ids", "mask", "truncated"), ref[:3], lean[:3]):
        assert torch.equal(a, b), name
    live = ref[1].bool()
    gap = (ref[3] - lean[3]).abs()[live]
    assert gap.max() < 0.25 and gap.mean() < 0.01 and gap.max() > 0  # > 0: bf16 arithmetic, not a copy of it
    assert (lean[3][~live] == 0).all()


def test_sampled_tokens_equal_the_reference_on_most_rows(mixed):
    """Sampled (temperature 0.8, top-p 0.95), the same generator draws the same uniforms; a draw near a boundary
    between two tokens can fall on the other side after a bf16 rounding, and the row then diverges: at least
    95 % of the rows must be identical over 4 seeds x 128 rows (measured here: 99.8 %)."""
    model, tok = mixed
    ids, mask = encode(tok, 16, 8, seed=1)
    kw = dict(max_new_tokens=20, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, temperature=0.8,
              top_p=0.95)
    same = []
    for seed in range(4):
        ref = generate.sample(model, ids, mask, generator=torch.Generator().manual_seed(seed), **kw)[0]
        lean = LD.sample(model, ids, mask, generator=torch.Generator().manual_seed(seed), **kw)[0]
        T = min(ref.shape[1], lean.shape[1])
        same.append((ref[:, :T] == lean[:, :T]).all(-1) & (ref[:, T:] == tok.pad_token_id).all(-1)
                    & (lean[:, T:] == tok.pad_token_id).all(-1))
    assert torch.cat(same).float().mean() >= 0.95


def _grads(trainer, batch):
    trainer.model.train()
    trainer.model.zero_grad(set_to_none=True)
    trainer.updater.loss(batch).total.backward()
    return {n: p.grad.clone() for n, p in trainer.model.named_parameters()}


def test_the_update_under_autocast_gives_fp32_gradients_to_bf16_rounding():
    """One fixed batch (fixed advantages, pi_old each side's own forward so the ratio is 1), the same start
    weights: every parameter's gradient under bf16 autocast is within 4 % (relative norm; bf16 keeps 8 bits,
    2^-8 = 0.4 % per rounding, and the backward chains a few dozen) of the fp32 gradient, and the whole
    gradient within 2 % (measured: 1.2 % worst tensor, 0.85 % whole). The weights and their gradients stay fp32."""
    fp32 = rlnb.Trainer.from_pretrained(DEFAULT_DIR, seed=0, device="cpu", **SMALL)
    bf16 = rlnb.Trainer.from_pretrained(DEFAULT_DIR, seed=0, device="cpu", autocast="bf16", **SMALL)
    batch = fp32.rewarder.step(fp32.sampler.step(fp32.next_prompts()))
    batch = batch.replace(adv=torch.randn(batch.B, generator=torch.Generator().manual_seed(0)), old_logp=None)
    g32, g16 = _grads(fp32, batch), _grads(bf16, batch)
    assert all(g.dtype == torch.float32 for g in g16.values())
    rel = {n: float((g16[n] - g32[n]).norm() / g32[n].norm()) for n in g32}
    whole = torch.cat([g.flatten() for g in g16.values()]) - torch.cat([g.flatten() for g in g32.values()])
    assert max(rel.values()) < 0.04 and min(rel.values()) > 0                # bf16 ran, and stayed close
    assert whole.norm() < 0.02 * torch.cat([g.flatten() for g in g32.values()]).norm()


def test_the_embedded_default_by_path_is_the_tiny_trainer_in_fp32():
    """The benchmark builds both precisions with ``from_pretrained(DEFAULT_DIR, autocast=...)``: without the
    option it is ``Trainer.tiny``, step for step."""
    a = rlnb.Trainer.tiny("grpo", seed=0, **SMALL)
    b = rlnb.Trainer.from_pretrained(DEFAULT_DIR, "add", "grpo", seed=0, device="cpu", **SMALL)
    for _ in range(2):
        ra, rb = a.step(), b.step()
        assert torch.equal(ra.batch.completion_ids, rb.batch.completion_ids)
    assert all(torch.equal(p, q) for p, q in zip(a.model.parameters(), b.model.parameters()))


@pytest.mark.parametrize("arch", ["qwen2", "qwen3"])
def test_other_families_under_autocast_fused_and_module_step(mixed, arch):
    """Random Qwen2 (fused step, biases) and Qwen3 (the module step: per-head q/k norms) models under the option.
    Random weights give near-flat logits, so a bf16 rounding can flip a greedy near-tie: at least 90 % of 64 rows
    identical (measured 94-98 %), and on those rows the log-probs within 0.02 (measured 0.002-0.004)."""
    import transformers as tf

    _, tok = mixed
    cls, cfg = {"qwen2": (tf.Qwen2ForCausalLM, tf.Qwen2Config), "qwen3": (tf.Qwen3ForCausalLM, tf.Qwen3Config)}[arch]
    torch.manual_seed(0)                                                 # test_lean_decode.tiny_hf's models
    model = cls(cfg(vocab_size=len(tok), hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=128,
                    tie_word_embeddings=False)).eval()
    model = enable_autocast(model, torch.bfloat16)
    assert LD.supported(model) and LD.fusable(model) == (arch == "qwen2")
    ids, mask = encode(tok, 64, 1, seed=2)
    kw = dict(max_new_tokens=10, eos_token_id=5, pad_token_id=tok.pad_token_id, greedy=True, return_logp=True)
    ref, lean = generate.sample(model, ids, mask, **kw), LD.sample(model, ids, mask, **kw)
    T = min(ref[0].shape[1], lean[0].shape[1])
    same = (ref[0][:, :T] == lean[0][:, :T]).all(-1) & (ref[1].sum(-1) == lean[1].sum(-1))
    assert same.float().mean() >= 0.9
    assert (ref[3][same, :T] - lean[3][same, :T]).abs().max() < 0.02
