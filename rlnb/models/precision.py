"""Mixed precision: fp32 master weights, the model's forward under ``torch.autocast`` (matmuls in bf16 or fp16).

``enable_autocast`` is what ``Trainer.from_pretrained(..., autocast="bf16")`` applies (the embedded default
takes it too: ``Trainer.from_pretrained(rlnb.models.DEFAULT_DIR, autocast="bf16")``). The weights, their
gradients and AdamW's state stay fp32; under autocast the linear layers and attention run in the half
dtype, while norms, the residual stream, the rotary angles, the token log-softmax and the loss stay fp32
(the decoder's last hidden states are returned in fp32, and ``rlnb.models.forward`` applies the LM head to
them outside autocast). On CPUs with bf16 matrix instructions (AVX512-BF16, AMX) the matmuls run faster.

``autocast_dtype`` recognises the wrapper, so the lean decode (``rlnb.models.lean_decode``) can run the same
arithmetic under the same autocast instead of falling back to the reference loop.
"""

from __future__ import annotations

import functools
import types

import torch


def _autocast_forward(cls_forward, dtype: torch.dtype, fp32_hidden: bool):
    """A ``forward`` running ``cls_forward`` under autocast. Bound with ``types.MethodType`` so that
    ``copy.deepcopy`` (the Trainer's reference model) rebinds it to the copy."""

    @functools.wraps(cls_forward)  # keeps the signature: generate.py inspects it for the cache's name
    def forward(self, *args, **kwargs):
        with torch.autocast(self.device.type, dtype=dtype):
            out = cls_forward(self, *args, **kwargs)
        if fp32_hidden:  # forward.py multiplies these by the fp32 LM head / value head outside autocast
            out.last_hidden_state = out.last_hidden_state.float()
        return out

    forward.autocast_dtype = dtype  # what autocast_dtype reads: this wrapper, not any replaced forward
    return forward


def enable_autocast(model, dtype: torch.dtype = torch.bfloat16):
    """Run ``model``'s forward (and its decoder's, which ``rlnb.models.forward`` calls directly for the FP32 LM
    head) under ``torch.autocast``: weights stay in their dtype, matmuls run in ``dtype``."""
    decoder = model.get_decoder()
    decoder.forward = types.MethodType(_autocast_forward(type(decoder).forward, dtype, True), decoder)
    model.forward = types.MethodType(_autocast_forward(type(model).forward, dtype, False), model)
    return model


def autocast_dtype(model) -> torch.dtype | None:
    """The dtype ``enable_autocast`` gave ``model`` (its forward and its decoder's both wrapped, alike), else None.

    >>> autocast_dtype(torch.nn.Linear(2, 2)) is None
    True
    """
    if not hasattr(model, "get_decoder"):
        return None
    found = {getattr(getattr(vars(m).get("forward"), "__func__", None), "autocast_dtype", None)
             for m in (model, model.get_decoder())}
    return found.pop() if len(found) == 1 else None
