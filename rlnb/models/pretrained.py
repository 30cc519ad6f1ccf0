"""Real models: ``Trainer.from_pretrained`` runs a recipe on any Hugging Face causal LM.

The loop is the same as on the embedded default; what changes with a real model is how it is loaded and
how the memory is spent:

* **dtype**: bf16 weights on CUDA, fp32 on CPU, unless asked. bf16 *weights* updated by AdamW lose
  updates smaller than half a bf16 step (about 2^-9 of the weight): at the learning rates real models use
  (1e-6) most updates round away. ``dtype="fp32", autocast="bf16"`` keeps fp32 master weights and runs
  the forward in bf16 (mixed precision, 2x the weight memory); LoRA on bf16 weights keeps its adapters
  in fp32 and avoids the problem too.
* **gradient checkpointing**: the backward recomputes each layer's activations instead of storing them.
  The Sampler switches the model to ``eval()`` and asks for the KV cache explicitly; training forwards
  never build a cache (``config.use_cache = False``).
* **the token loss**: ``rlnb.models.forward`` calls the ``rlnb.kernels`` dispatcher, which picks the Triton kernels
  for CUDA logits and the plain-torch reference elsewhere. ``fp32_lm_head`` is a recipe field.
* **LoRA** (``lora_r > 0``, needs ``peft``): only the adapters train. The reference model for beta > 0 is
  the same network with its adapters switched off, so it costs no memory.
* **chat templates**: ``chat_template=True`` wraps every prompt in the tokenizer's chat template (user turn,
  generation prompt), as instruct models expect; the embedded default has no template.
"""

from __future__ import annotations

from pathlib import Path

import torch

from rlnb import recipes as recipes_mod
from rlnb import tasks as tasks_mod
from rlnb.core.checks import check_device
from rlnb.models import load
from rlnb.models.precision import enable_autocast  # also imported from here by checkpoint_read and tests
from rlnb.tasks.chat import ChatTemplateTask

DTYPES = {"fp32": torch.float32, "float32": torch.float32, "bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
          "fp16": torch.float16, "float16": torch.float16}


def resolve_device(device) -> torch.device:
    """``None`` -> CUDA when available, else CPU. Asking for CUDA without one raises."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return check_device("device", device)


def resolve_dtype(dtype, device: torch.device) -> torch.dtype:
    """``None`` -> bf16 on CUDA, fp32 elsewhere; names like ``"bf16"`` or torch float dtypes."""
    if dtype is None:
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if isinstance(dtype, torch.dtype) and dtype in DTYPES.values():
        return dtype
    if isinstance(dtype, str) and dtype in DTYPES:
        return DTYPES[dtype]
    raise ValueError(f"dtype: expected one of {sorted(DTYPES)} or torch.float32/bfloat16/float16, got {dtype!r}")


def enable_checkpointing(model) -> None:
    """Gradient (activation) checkpointing, non-reentrant (works with frozen embeddings, e.g. LoRA)."""
    if not getattr(model, "supports_gradient_checkpointing", False):
        raise ValueError(f"gradient_checkpointing: {type(model).__name__} does not support it")
    kw = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.2x renamed it
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kw)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kw)


# --- LoRA --------------------------------------------------------------------------------------------
def add_lora(model, *, lora_r: int, lora_alpha: float | None = None, lora_dropout: float = 0.0,
             lora_target_modules="all-linear"):
    """Wrap ``model`` with LoRA adapters of rank ``lora_r`` (peft); only the adapters train."""
    try:
        import peft
    except ImportError as e:
        raise ImportError("lora_r: LoRA needs peft (pip install 'rlnb[peft]')") from e
    if not isinstance(lora_r, int) or lora_r < 1:
        raise ValueError(f"lora_r: expected a positive int rank, got {lora_r!r}")
    cfg = peft.LoraConfig(r=lora_r, lora_alpha=lora_alpha if lora_alpha is not None else 2 * lora_r,
                          lora_dropout=lora_dropout, target_modules=lora_target_modules, task_type="CAUSAL_LM")
    return peft.get_peft_model(model, cfg)


class AdaptersOff(torch.nn.Module):
    """The reference policy of a LoRA model: the same network with its adapters switched off.

    Quacks like the model for ``rlnb.models.forward`` (call, ``get_decoder``, ``get_output_embeddings``,
    ``parameters``); every forward runs inside peft's ``disable_adapter()``.
    """

    def __init__(self, peft_model):
        super().__init__()
        object.__setattr__(self, "peft_model", peft_model)  # not a submodule: its weights are the policy's

    def forward(self, *args, **kwargs):
        with self.peft_model.disable_adapter():
            return self.peft_model(*args, **kwargs)

    def get_decoder(self):
        return _Off(self.peft_model, self.peft_model.get_decoder())

    def get_output_embeddings(self):
        return self.peft_model.get_output_embeddings()

    def parameters(self, recurse: bool = True):
        return self.peft_model.parameters(recurse)

    def save_pretrained(self, *args, **kwargs):
        raise NotImplementedError("AdaptersOff: the LoRA reference is the policy with adapters off; save the "
                                  "policy's base model instead")


class _Off:
    def __init__(self, peft_model, module):
        self.peft_model, self.module = peft_model, module

    def __getattr__(self, name):  # training, gradient_checkpointing, forward's signature: the decoder's own
        if name in ("peft_model", "module"):
            raise AttributeError(name)
        return getattr(self.module, name)

    def __call__(self, *args, **kwargs):
        with self.peft_model.disable_adapter():
            return self.module(*args, **kwargs)


SAFE_UPDATE_MAX_PARAMS = 50_000_000  # above this, a per-step snapshot of weights + Adam state is too costly


# --- the entry point -----------------------------------------------------------------------------------
def from_pretrained(trainer_cls, name_or_path: str | Path, *, task="add", recipe="grpo", seed: int = 0,
                    dtype=None, device=None, autocast=None, gradient_checkpointing: bool = False,
                    lora_r: int = 0, lora_alpha: float | None = None, lora_dropout: float = 0.0,
                    lora_target_modules="all-linear", chat_template: bool = False,
                    system_prompt: str | None = None, safe_update: bool | None = None, **overrides):
    """A ``Trainer`` on the causal LM at ``name_or_path`` (a local folder works offline). See the module
    docstring for what each option does; ``overrides`` are recipe fields (``lr=1e-6``, ...) and the
    Trainer's ``pool_size``, ``keep_records`` and ``reward_on_error``.

    ``safe_update`` (undo a failed update from a snapshot of weights and optimizer) defaults to True only
    for models under ``SAFE_UPDATE_MAX_PARAMS`` parameters: the snapshot costs about 3x the model's memory.
    """
    dev = resolve_device(device)
    model, tokenizer = load(name_or_path, dtype=resolve_dtype(dtype, dev), device=str(dev))
    model.config.use_cache = False  # only the Sampler needs a KV cache, and it asks for one
    if gradient_checkpointing:
        enable_checkpointing(model)
    if autocast is not None:
        ac = resolve_dtype(autocast, dev)
        if ac == torch.float32:
            raise ValueError("autocast: expected a half-precision dtype ('bf16' or 'fp16'), got fp32")
        enable_autocast(model, ac)
    trainer_kw = {k: overrides.pop(k) for k in ("pool_size", "keep_records", "reward_on_error", "reward_time_limit")
                  if k in overrides}
    rec = recipes_mod.get(recipe, **overrides)
    ref_model = None
    if lora_r:
        model = add_lora(model, lora_r=lora_r, lora_alpha=lora_alpha, lora_dropout=lora_dropout,
                         lora_target_modules=lora_target_modules)
        ref_model = AdaptersOff(model) if rec.beta > 0 else None
    the_task = tasks_mod.get(task)
    if chat_template:
        the_task = ChatTemplateTask(the_task, tokenizer, system_prompt=system_prompt)
    if safe_update is None:
        safe_update = sum(p.numel() for p in model.parameters()) <= SAFE_UPDATE_MAX_PARAMS
    trainer = trainer_cls(model, tokenizer, the_task, rec, seed=seed, ref_model=ref_model, safe_update=safe_update,
                          **trainer_kw)
    trainer.model_options = {"gradient_checkpointing": gradient_checkpointing,  # re-applied by Trainer.load
                             "autocast": None if autocast is None else str(resolve_dtype(autocast, dev))[6:]}
    return trainer
