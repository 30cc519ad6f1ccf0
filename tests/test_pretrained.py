"""``Trainer.from_pretrained``: the embedded default by path, random Qwen2 / Llama models built from configs,
gradient checkpointing, bf16, mixed precision, LoRA and chat templates, all on CPU."""

import copy

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

import rlnb
from rlnb.core import forward_options
from rlnb.models import DEFAULT_DIR, build_tokenizer
from rlnb.models.forward import completion_logprobs
from rlnb.models.pretrained import ChatTemplateTask, enable_autocast
from rlnb.tasks.base import Task

SMALL = dict(prompts_per_step=2, num_generations=4, max_new_tokens=8, warmup_steps=0)


class Parity(Task):
    """Reward 1 when the completion's first character has an even code point: about half of a random
    model's samples, so every group has signal."""

    name = "parity"

    def make_example(self, rng):
        return {"prompt": f"{rng.randint(0, 99)}+{rng.randint(0, 99)}=", "answer": "", "target": ""}

    def extract(self, completion):
        return completion[:1] or None

    def verify(self, extracted, answer):
        return ord(extracted) % 2 == 0


def _random_model(path, arch):
    tok = build_tokenizer()
    common = dict(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                  bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(**common)) if arch == "qwen2" else LlamaForCausalLM(LlamaConfig(**common))
    model.save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return {arch: _random_model(root / arch, arch) for arch in ("qwen2", "llama")}


def _logp(model, batch):
    with torch.no_grad():
        return completion_logprobs(model, batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.mask).logp


def _params(model):
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def test_default_by_path_is_the_tiny_trainer():
    a = rlnb.Trainer.from_pretrained(DEFAULT_DIR, task=Parity(), recipe="grpo", seed=1, **SMALL)
    b = rlnb.Trainer.tiny("grpo", task=Parity(), seed=1, **SMALL)
    assert next(a.model.parameters()).dtype == torch.float32 and a.model.config.use_cache is False
    ra, rb = a.step(), b.step()
    assert ra.batch.completions == rb.batch.completions
    assert ra.metrics["loss"] == rb.metrics["loss"] and ra.metrics["grad_norm"] == rb.metrics["grad_norm"] > 0
    for (n, p), q in zip(a.model.named_parameters(), b.model.parameters()):
        assert torch.equal(p, q), n


@pytest.mark.parametrize("arch, cls", [("qwen2", "Qwen2ForCausalLM"), ("llama", "LlamaForCausalLM")])
def test_random_model_of_another_architecture_trains(model_dirs, arch, cls):
    tr = rlnb.Trainer.from_pretrained(model_dirs[arch], task=Parity(), recipe="grpo", seed=0, lr=1e-3, **SMALL)
    assert type(tr.model).__name__ == cls
    rec = tr.step()
    b = rec.batch
    assert 0 < float(b.rewards.mean()) < 1                       # both kinds of sample: a real signal
    assert rec.metrics["clip_ratio/region_mean"] == 0 and torch.all(rec.stats.ratio[b.mask.bool()] == 1)
    # first-order policy improvement: log-probs of positive-advantage completions went up relative to
    # negative ones, sum_i A_i (log pi_new(o_i) - log pi_old(o_i)) > 0
    delta = ((_logp(tr.model, b) - b.old_logp) * b.mask).sum(-1)  # (B,)
    assert float((b.adv * delta).sum()) > 0


def test_gradient_checkpointing_gives_the_same_update(model_dirs):
    plain = rlnb.Trainer.from_pretrained(model_dirs["qwen2"], task=Parity(), seed=1, **SMALL)
    ckpt = rlnb.Trainer.from_pretrained(model_dirs["qwen2"], task=Parity(), seed=1, gradient_checkpointing=True,
                                        **SMALL)
    assert ckpt.model.is_gradient_checkpointing and not plain.model.is_gradient_checkpointing
    ra, rb = plain.step(), ckpt.step()
    assert ra.batch.completions == rb.batch.completions and ra.metrics["grad_norm"] > 0
    for (n, p), q in zip(plain.model.named_parameters(), ckpt.model.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=1e-6, msg=n)


def test_bf16_weights_with_fp32_lm_head():
    tr = rlnb.Trainer.from_pretrained(DEFAULT_DIR, task=Parity(), dtype="bf16", fp32_lm_head=True, **SMALL)
    assert next(tr.model.parameters()).dtype == torch.bfloat16
    rec = tr.step()
    assert rec.batch.old_logp.dtype == torch.float32 and torch.isfinite(torch.tensor(rec.metrics["loss"]))
    assert torch.all(rec.stats.ratio[rec.batch.mask.bool()] == 1)   # old and new log-probs: the same function


def test_mixed_precision_keeps_fp32_weights_and_a_separate_reference():
    tr = rlnb.Trainer.from_pretrained(DEFAULT_DIR, task=Parity(), dtype="fp32", autocast="bf16", beta=0.1,
                                      lr=1e-3, **SMALL)
    ids = torch.tensor([[1, 20, 21]])
    assert tr.model(input_ids=ids).logits.dtype == torch.bfloat16        # matmuls in bf16 ...
    assert next(tr.model.parameters()).dtype == torch.float32           # ... master weights in fp32
    tr.step()
    fresh = enable_autocast(rlnb.load_default()[0], torch.bfloat16)
    with torch.no_grad():
        want, ref, policy = (m(input_ids=ids).logits for m in (fresh, tr.ref_model, tr.model))
    # the reference's forward runs the reference's weights (a deep copy must rebind the autocast wrapper)
    assert torch.equal(ref, want) and not torch.equal(policy, want)


def test_lora_trains_adapters_only_and_the_reference_is_the_base():
    pytest.importorskip("peft", reason="LoRA needs peft (pip install 'rlnb[peft]')")
    tr = rlnb.Trainer.from_pretrained(DEFAULT_DIR, task=Parity(), lora_r=4, beta=0.1, lr=1e-2, seed=2, **SMALL)
    trainable = {n: p.numel() for n, p in tr.model.named_parameters() if p.requires_grad}
    assert all("lora_" in n for n in trainable)
    # rank 4 on every linear layer of 4 blocks: q,k,v,o 4*(128+128) each, gate,up 4*(128+512), down 4*(512+128)
    assert sum(trainable.values()) == 4 * (4 * 1024 + 3 * 2560)
    base_before = {n: p.detach().clone() for n, p in tr.model.named_parameters() if not p.requires_grad}
    rec = tr.step()
    assert rec.metrics["grad_norm"] > 0
    assert all(torch.equal(p, base_before[n]) for n, p in tr.model.named_parameters() if not p.requires_grad)
    base = rlnb.load_default()[0]
    b = rec.batch
    # the base through the model's modules too, as the wrapped reference runs (rlnb.models.lean_forward runs a plain
    # model's layers in fewer calls: the same numbers to rounding only)
    with forward_options.using(layers="modules"):
        assert torch.equal(_logp(tr.ref_model, b), _logp(base, b))       # adapters off = the base model
    assert not torch.allclose(_logp(tr.model, b), _logp(base, b))        # adapters on = the trained policy


def _templated(tmp_path, template):
    model, tok = rlnb.load_default()
    tok.chat_template = template
    model.save_pretrained(tmp_path, safe_serialization=True)
    tok.save_pretrained(tmp_path)
    return tmp_path, tok


def test_chat_template_wraps_prompts_without_a_second_bos(tmp_path):
    template = ("{{ bos_token }}{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"
                "{% if add_generation_prompt %}<assistant>{% endif %}")
    path, tok = _templated(tmp_path, template)
    task = ChatTemplateTask(rlnb.tasks.get("add"), tok, system_prompt="Be brief.")
    assert task.format("1+2=") == "<system>Be brief.<user>1+2=<assistant>"
    ids = tok(task.format("1+2=")).input_ids
    assert ids.count(tok.bos_token_id) == 1 and ids[0] == tok.bos_token_id
    tr = rlnb.Trainer.from_pretrained(path, chat_template=True, **SMALL)
    plain = rlnb.tasks.get("add").dataset(3, seed="train:0")["prompt"]
    assert tr.pool["prompt"][:3] == [f"<user>{p}<assistant>" for p in plain]
    assert tr.task.reward("0+9=9;5+3=8;7+8=15>1589", "1589").reward == 1.0   # the task's own verifier


def test_bad_options_name_the_argument():
    with pytest.raises(ValueError, match="chat_template"):
        rlnb.Trainer.from_pretrained(DEFAULT_DIR, chat_template=True)      # the default has no template
    with pytest.raises(ValueError, match="dtype"):
        rlnb.Trainer.from_pretrained(DEFAULT_DIR, dtype="int8")
    with pytest.raises(ValueError, match="autocast"):
        rlnb.Trainer.from_pretrained(DEFAULT_DIR, autocast="fp32")
    with pytest.raises(ValueError, match="device"):
        rlnb.Trainer.from_pretrained(DEFAULT_DIR, device="tpu:0")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device"):
            rlnb.Trainer.from_pretrained(DEFAULT_DIR, device="cuda")


def test_lora_rank_must_be_positive():
    pytest.importorskip("peft", reason="LoRA needs peft (pip install 'rlnb[peft]')")
    with pytest.raises(ValueError, match="lora_r"):
        rlnb.Trainer.from_pretrained(DEFAULT_DIR, lora_r=-1)


def test_deepcopy_of_a_mixed_precision_model_runs_its_own_weights():
    model = enable_autocast(rlnb.load_default()[0], torch.bfloat16)
    twin = copy.deepcopy(model)
    with torch.no_grad():
        twin.get_output_embeddings().weight.zero_()        # tied: zero logits for the twin only
    ids = torch.tensor([[1, 20, 21]])
    assert twin.forward.__self__ is twin and twin.get_decoder().forward.__self__ is twin.get_decoder()
    assert torch.count_nonzero(twin(input_ids=ids).logits) == 0 and torch.count_nonzero(model(input_ids=ids).logits) > 0


def test_cli_train_with_a_model_folder_uses_from_pretrained(tmp_path, model_dirs):
    from rlnb.cli import main

    out = tmp_path / "run"
    rc = main(["train", "--model", str(model_dirs["llama"]), "--task", "add", "--steps", "1", "--out", str(out),
               "--eval-n", "0", "--no-progress", "--gradient-checkpointing", "--prompts-per-step", "2",
               "--num-generations", "2", "--max-new-tokens", "4"])
    assert rc == 0 and len((out / "metrics.jsonl").read_text().splitlines()) == 1
    assert (out / "checkpoint" / "model" / "model.safetensors").exists()


def test_gsm8k_pool_from_the_trainers_string_seed():
    task = rlnb.tasks.get("gsm8k")
    a, b, c = (task.dataset(4, seed=s)["prompt"] for s in ("train:0", "train:0", "train:1"))
    assert a == b and a != c
    assert rlnb.Trainer.from_pretrained(DEFAULT_DIR, task="gsm8k").pool[0]["prompt"].startswith("Q: ")
