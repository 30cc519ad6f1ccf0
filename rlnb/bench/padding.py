"""Where the step's padding went, side by side in one run: generation and the training forward, each way.

    python scripts/bench_padding.py              # 20 interleaved rounds on a default-run batch, 2 threads

Generation (the same prompts, the same seed, so the same tokens):
  * ``shared prefill`` (rlnb's default): each distinct prompt prefilled once, its KV cache copied to its G rows;
  * ``prefill per row``: every row prefilled;
  * ``preallocated cache``: a KV cache written in place into buffers sized for the whole generation (a
    "static" cache without compilation) instead of growing by concatenation. Measured, and not kept: the
    attention then reads strided views, which cost what the concatenation saved.
Training forward and backward (the same batch, the same loss):
  * ``shared prompt`` (the default): distinct prompts once, completions bucketed (``rlnb.models.shared_prompt``),
    fp32 plain layers in fewer calls (``rlnb.models.lean_forward``);
  * ``bucketed``: whole rows bucketed by length; ``padded``: every row at the batch's widths (the reference);
  * ``shared, model's modules``: the default's computation through the model's own modules
    (``ForwardOptions(layers="modules")``).

Each round times every variant once, in turn, so all of them share the machine's load; the medians and their
ratios to the default are printed.

The same as ``python -m rlnb.bench padding`` (``scripts/bench_padding.py`` is its entry point, the name the docs give).
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch

import rlnb
from rlnb.core import forward_options
from rlnb.models import generate
from rlnb.models.forward import completion_hidden


def preallocated_layer(capacity: int):
    """A DynamicLayer that writes into buffers of ``capacity`` positions and hands out views."""
    from transformers.cache_utils import DynamicLayer

    class Preallocated(DynamicLayer):
        def lazy_initialization(self, k, v):
            B, H, _, D = k.shape
            self.buf_k, self.buf_v = k.new_empty(B, H, capacity, D), v.new_empty(B, H, capacity, v.shape[-1])
            self.n, self.device, self.is_initialized = 0, k.device, True

        def update(self, k, v, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(k, v)
            n = k.shape[-2]
            self.buf_k[:, :, self.n:self.n + n], self.buf_v[:, :, self.n:self.n + n] = k, v
            self.n += n
            self.keys, self.values = self.buf_k[:, :, :self.n], self.buf_v[:, :, :self.n]
            return self.keys, self.values

        def get_seq_length(self) -> int:
            return self.n if self.is_initialized else 0

        def batch_select_indices(self, idx):
            if self.is_initialized:
                self.buf_k, self.buf_v = self.buf_k[idx], self.buf_v[idx]
                self.keys, self.values = self.buf_k[:, :, :self.n], self.buf_v[:, :, :self.n]

    return Preallocated()


def generation_variants(trainer, batch):
    """name -> a function that samples the batch's prompts and returns the completion ids."""
    from transformers import DynamicCache

    model, tok, T = trainer.model, trainer.tokenizer, trainer.recipe.max_new_tokens
    kw = dict(max_new_tokens=T, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    shared = generate.distinct_prompts

    def run(prefill_per_row=False, preallocate=False):
        gen = torch.Generator().manual_seed(0)
        forward = model.forward
        if preallocate:
            def forward_with_cache(*args, **kwargs):
                if "cache" not in kwargs and "past_key_values" not in kwargs:
                    cache = DynamicCache()
                    cache.layers = [preallocated_layer(batch.prompt_ids.shape[1] + T)
                                    for _ in range(model.config.num_hidden_layers)]
                    kwargs[generate.cache_arg_name(model)] = cache
                return forward(*args, **kwargs)
            model.forward = forward_with_cache
        if prefill_per_row:  # every row its own prompt: nothing is shared
            generate.distinct_prompts = lambda ids, m: (torch.arange(len(ids)), torch.arange(len(ids)))
        try:
            return generate.sample(model, batch.prompt_ids, batch.prompt_mask, generator=gen, **kw)[0]
        finally:
            model.forward, generate.distinct_prompts = forward, shared

    return {"shared prefill": run, "prefill per row": lambda: run(prefill_per_row=True),
            "preallocated cache": lambda: run(preallocate=True)}


def training_variants(trainer, batch):
    """name -> a function that runs the training forward and backward of a fixed loss on the hidden states."""
    args = (batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.mask)
    w = torch.randn(*batch.mask.shape, trainer.model.config.hidden_size, generator=torch.Generator().manual_seed(1))
    w = w * batch.mask[..., None]                                         # (B, T, H) only real positions count

    def run(mode, layers="lean"):
        trainer.model.zero_grad(set_to_none=True)
        with forward_options.using(padding=mode, layers=layers):
            (completion_hidden(trainer.model, *args) * w).sum().backward()
        return trainer.model.get_output_embeddings().weight.grad.clone()

    out = {f"{m} forward+backward": (lambda m=m: run(m)) for m in ("shared", "bucketed", "padded")}
    out["shared, model's modules"] = lambda: run("shared", layers="modules")  # rlnb.models.lean_forward off
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warm-steps", type=int, default=30, help="GRPO steps before the batch is taken")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    trainer = rlnb.Trainer.tiny("grpo", seed=0)
    for _ in range(args.warm_steps):                                      # completions as long as mid-run
        trainer.step()
    batch = trainer.rollout()
    groups = {"generation": generation_variants(trainer, batch), "training": training_variants(trainer, batch)}
    for name, variants in groups.items():
        results = {k: f() for k, f in variants.items()}                   # warm-up, and the outputs to compare
        first = next(iter(results.values()))
        # generation: the same tokens; training: the LM head's gradient to fp32 rounding (relative to its largest)
        same = {k: torch.equal(v, first) if name == "generation"
                else float((v - first).abs().max() / first.abs().max()) < 1e-4 for k, v in results.items()}
        times = {k: [] for k in variants}
        for _ in range(args.rounds):
            for k, f in variants.items():
                t0 = time.perf_counter()
                f()
                times[k].append(time.perf_counter() - t0)
        base = statistics.median(next(iter(times.values())))
        print(f"{name} ({batch.B} rows, {len(generate.distinct_prompts(batch.prompt_ids, batch.prompt_mask)[0])} "
              f"distinct prompts, {args.rounds} interleaved rounds):")
        for k, ts in times.items():
            med = statistics.median(ts)
            print(f"  {k:28s} median {med * 1e3:7.1f} ms   x{med / base:.2f} of the default   "
                  f"{'same result' if same[k] else 'DIFFERENT result'}")

