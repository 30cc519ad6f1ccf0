"""GPU check of the real-model path: a ~100M-parameter random Qwen2-style model (no download), saved to a
temporary folder and loaded with ``Trainer.from_pretrained``, two Trainer steps per variant.

    PYTHONPATH=. python scripts/gpu_check_real.py            # on the GPU machine, about a minute
    PYTHONPATH=. python scripts/gpu_check_real.py --cpu-smoke  # the same script on a tiny model, on CPU

Variants: bf16 weights + gradient checkpointing (the default on CUDA); the same with the FP32 LM head;
fp32 master weights + bf16 autocast; LoRA r=16 with beta > 0 (reference = adapters off). For each:
seconds per step (the first includes Triton's compilation), peak GPU memory, loss, grad norm, which
token-loss backend ran, and how far the Triton log-probs are from the plain-torch reference.
A variant that fails prints its traceback and the script goes on; the exit status counts failures.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import rlnb  # noqa: E402
from rlnb.models import build_tokenizer  # noqa: E402
from rlnb.models.forward import completion_logprobs  # noqa: E402
from rlnb.tasks.base import Task  # noqa: E402


class OddLength(Task):
    """Reward 1 when the decoded completion has an odd number of characters: a random model over a 32k
    vocabulary decodes most tokens to nothing (the character tokenizer knows 100), so this varies."""

    name = "odd_length"

    def make_example(self, rng):
        return {"prompt": f"{rng.randint(100, 999)}+{rng.randint(100, 999)}=", "answer": "", "target": ""}

    def extract(self, completion):
        return completion

    def verify(self, extracted, answer):
        return len(extracted) % 2 == 1


def build(path: Path, *, smoke: bool) -> int:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = build_tokenizer()
    size = (dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=512) if smoke else
            dict(hidden_size=768, intermediate_size=2048, num_hidden_layers=12, num_attention_heads=12,
                 num_key_value_heads=2, vocab_size=32000))
    cfg = Qwen2Config(**size, max_position_embeddings=1024, tie_word_embeddings=True, bos_token_id=tok.bos_token_id,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    return sum(p.numel() for p in model.parameters())


def backend_name(device) -> str:
    kernels = rlnb.kernels
    if hasattr(kernels, "resolve_backend"):
        return kernels.resolve_backend(torch.empty(1, device=device))
    return "reference (rlnb.kernels has no dispatcher yet)"


def logp_gap(trainer, batch) -> float | None:
    """max |Triton log-prob - reference log-prob| on this batch, when the dispatcher can switch."""
    kernels = rlnb.kernels
    if not hasattr(kernels, "set_backend"):
        return None
    dev = trainer.device
    args = [x.to(dev) for x in (batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.mask)]
    out = {}
    with torch.no_grad():
        for name in ("auto", "torch"):
            kernels.set_backend(name)
            out[name] = completion_logprobs(trainer.model, *args, temperature=trainer.recipe.temperature).logp
    kernels.set_backend("auto")
    return float((out["auto"] - out["torch"]).abs().max())


def run_variant(name: str, path: Path, recipe: dict, options: dict, *, steps: int) -> bool:
    cuda = torch.cuda.is_available()
    print(f"\n== {name}: {options}", flush=True)
    try:
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        trainer = rlnb.Trainer.from_pretrained(path, task=OddLength(), recipe="grpo", **options, **recipe)
        print(f"   loaded in {time.perf_counter() - t0:.1f} s; weights {next(trainer.model.parameters()).dtype}; "
              f"token-loss backend: {backend_name(trainer.device)}", flush=True)
        for _ in range(steps):
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            rec = trainer.step()
            if cuda:
                torch.cuda.synchronize()
            m = rec.metrics
            stages = ", ".join(f"{k[7:]} {v:.2f}" for k, v in m.items() if k.startswith("timing/"))
            print(f"   step {m['step']}: {time.perf_counter() - t0:.2f} s ({stages}); loss {m['loss']:+.3e}, "
                  f"grad_norm {m['grad_norm']:.3e}, reward {m['reward']:.3f}, kl {m['kl']:.2e}, "
                  f"length {m['completions/mean_length']:.0f}", flush=True)
        gap = logp_gap(trainer, rec.batch)
        if gap is not None:
            print(f"   max |log-prob(auto backend) - log-prob(torch reference)| = {gap:.2e}")
        if cuda:
            print(f"   peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")
        ok = torch.isfinite(torch.tensor(m["loss"])).item() and m["grad_norm"] > 0
        print("   OK" if ok else "   FAILED: loss not finite or no gradient")
        return ok
    except Exception:
        traceback.print_exc()
        print("   FAILED")
        return False


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("--cpu-smoke", action="store_true", help="a tiny model on CPU: checks the script itself")
    p.add_argument("--steps", type=int, default=2)
    args = p.parse_args(argv)
    import transformers

    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"device {torch.cuda.get_device_name() if torch.cuda.is_available() else 'cpu'}")
    if not torch.cuda.is_available() and not args.cpu_smoke:
        print("no CUDA device: run with --cpu-smoke to check the script on CPU")
        return 2
    recipe = (dict(prompts_per_step=2, num_generations=2, max_new_tokens=8) if args.cpu_smoke else
              dict(prompts_per_step=16, num_generations=8, max_new_tokens=128))
    recipe.update(lr=1e-5, warmup_steps=0)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "qwen2-random"
        n = build(path, smoke=args.cpu_smoke)
        print(f"random Qwen2-style model: {n / 1e6:.1f}M parameters; P x G = {recipe['prompts_per_step']} x "
              f"{recipe['num_generations']}, {recipe['max_new_tokens']} new tokens")
        bf16 = {"dtype": "bf16", "gradient_checkpointing": True}
        variants = [
            ("bf16 + gradient checkpointing", recipe, bf16),
            ("bf16 + checkpointing + FP32 LM head", {**recipe, "fp32_lm_head": True}, bf16),
            ("fp32 master weights + bf16 autocast", recipe,
             {"dtype": "fp32", "autocast": "bf16", "gradient_checkpointing": True}),
            ("LoRA r=16 on bf16, beta=0.04 (reference = adapters off)", {**recipe, "beta": 0.04},
             {**bf16, "lora_r": 16}),
        ]
        failed = sum(not run_variant(name, path, r, o, steps=args.steps) for name, r, o in variants)
    print(f"\n{len(variants) - failed}/{len(variants)} variants OK")
    return failed


if __name__ == "__main__":
    sys.exit(main())
