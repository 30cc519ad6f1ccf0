"""Token log-probs, entropy and per-token loss: one API, three backends.

* ``"torch"``: the textbook reference (``rlnb.logprobs.token_logprobs``): whole ``log_softmax`` in fp32.
* ``"chunked"``: the lean plain-torch twin (``rlnb.logprobs.chunked_token_logprobs``): a few rows at a
  time, lse and H saved, softmax recomputed in backward. Runs anywhere.
* ``"triton"``: the kernels in ``token_loss.py``: one pass over the vocabulary forward (log-prob,
  entropy and the per-token loss together), one pass backward. Needs CUDA tensors, or CPU tensors
  with ``TRITON_INTERPRET=1`` (slow; for tests).

``"auto"`` (the default) takes the choice in force in this thread (``rlnb.core.forward_options``: a Trainer's
own while it steps, else :func:`set_backend`'s) if one was made, otherwise Triton for CUDA logits when Triton
imports, and ``"chunked"`` everywhere else (also for a tiny vocabulary: one chunk then covers many rows and
costs the same as the reference).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import torch

from rlnb.core import forward_options
from rlnb.core.forward_options import BACKENDS, check_choice
from rlnb.kernels.fused_linear import LinearTokenLogprobs, TorchRows, TritonRows, linear_chunk_rows
from rlnb.kernels.loss_terms import KERNEL_LOSSES, TokenLossOut, kernel_bounds, loss_hyper, token_loss_terms
from rlnb.logprobs import as_rows, check_inputs, chunked_token_logprobs
from rlnb.logprobs import token_logprobs as _reference

__all__ = ["BACKENDS", "KERNEL_LOSSES", "TokenLossOut", "fused_token_loss", "get_backend",
           "linear_token_logprobs", "resolve_backend", "set_backend", "token_logprobs", "triton_available",
           "triton_status"]


def set_backend(name: str) -> None:
    """Choose the backend for every call in this thread that passes ``backend="auto"`` ("auto" restores the
    default). A Trainer built afterwards takes it; one built before keeps its own (``set_forward_options``)."""
    check_choice("backend", name, BACKENDS)
    forward_options.set_current(backend=name)


def get_backend() -> str:
    """The backend choice in force in this thread ("auto" unless one was set)."""
    return forward_options.current().backend


@functools.lru_cache(maxsize=1)
def triton_available() -> bool:
    """True when Triton and our kernels import (Triton wheels exist for Linux only)."""
    try:
        import rlnb.kernels.token_loss  # noqa: F401
    except Exception:  # ImportError, or a Triton that fails to initialise on this machine
        return False
    return True


def triton_status() -> str:
    """One line for ``rlnb info``: which Triton, and where the kernels would run."""
    if not triton_available():
        return "not available (the chunked torch path is used)"
    import triton
    where = ("CUDA" if torch.cuda.is_available() else
             "interpreter (TRITON_INTERPRET=1)" if os.environ.get("TRITON_INTERPRET") == "1" else
             "installed, no CUDA device (the chunked torch path is used)")
    return f"triton {triton.__version__}: {where}"


def resolve_backend(x: torch.Tensor, backend: str = "auto") -> str:
    """The backend a call with tensor ``x`` will use."""
    check_choice("backend", backend, BACKENDS)
    name = backend if backend != "auto" else forward_options.current().backend
    if name == "auto":
        return "triton" if x.is_cuda and triton_available() else "chunked"
    if name == "triton":
        if not triton_available():
            raise RuntimeError("backend='triton': Triton is not importable here; use 'chunked'")
        if not x.is_cuda and os.environ.get("TRITON_INTERPRET") != "1":
            raise RuntimeError("backend='triton' needs CUDA tensors (or TRITON_INTERPRET=1 for CPU tests)")
    return name


@dataclass(frozen=True)
class KernelSpec:
    temperature: float = 1.0
    entropy: bool = False
    inplace: bool = False
    loss_code: int = -1          # -1: log-probs only; else KERNEL_LOSSES[name]
    lo: float = 0.8              # the ratio's clip bounds (see loss_terms.kernel_bounds)
    hi: float = 1.2
    dual_clip_c: float | None = None
    block_v: int | None = None   # tests only: force small vocabulary blocks


def _triton_call(logits, targets, old, adv, mask, spec: KernelSpec):
    from rlnb.kernels.token_loss import TritonTokenLoss
    rows = as_rows(logits)                                          # (B', T', V), no copy
    y = targets.long().reshape(-1).contiguous()                     # (N,)
    V = logits.shape[-1]
    if y.numel() and (int(y.min()) < 0 or int(y.max()) >= V):      # the kernel would read out of bounds
        raise ValueError(f"targets: expected token ids in [0, {V}), got [{int(y.min())}, {int(y.max())}]")
    args = [t.to(torch.float32).reshape(-1).contiguous() if t is not None else None for t in (old, adv, mask)]
    outs = TritonTokenLoss.apply(rows, y, *args, spec)
    shape = logits.shape[:-1]
    return [o.reshape(shape) if o.numel() == y.numel() else None for o in outs]


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, *, temperature: float = 1.0,
                   entropy: bool = False, backend: str = "auto", inplace: bool = False,
                   chunk_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log pi(target) and (optionally) entropy per position, fp32; same contract as the reference.

    inplace (chunked and triton): backward overwrites the logits with their gradient (no extra buffer).
    chunk_size: rows per chunk for "chunked".
    """
    name = resolve_backend(logits, backend)
    if name == "torch":
        return _reference(logits, targets, temperature=temperature, entropy=entropy)
    if name == "chunked":
        return chunked_token_logprobs(logits, targets, temperature=temperature, entropy=entropy,
                                      chunk_size=chunk_size, inplace=inplace)
    check_inputs(logits, targets, temperature)
    logp, H, *_ = _triton_call(logits, targets, None, None, None,
                               KernelSpec(float(temperature), entropy, inplace))
    return logp, H


def fused_token_loss(logits: torch.Tensor, targets: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor,
                     mask: torch.Tensor, *, loss: str = "ppo_clip", eps_low: float | None = None,
                     eps_high: float | None = None, dual_clip_c: float | None = None,
                     cispo_cap: float | None = None, temperature: float = 1.0, entropy: bool = False,
                     backend: str = "auto", inplace: bool = False) -> TokenLossOut:
    """Log-prob, entropy and the per-token loss in one pass over the logits.

    logits (B, T, V), targets / old_logp / mask (B, T), adv (B,) or (B, T). ``loss`` is one of
    ``KERNEL_LOSSES`` ("pg", "ppo_clip", "cispo") with the formulas, flags and hyperparameters of
    ``rlnb.algos.losses`` (a hyperparameter left None takes that function's default). Returns
    ``TokenLossOut`` (logp, entropy, loss, ratio, clipped_low, clipped_high, weight); logp, entropy
    and loss are differentiable w.r.t. the logits.
    """
    hyper = loss_hyper(loss, eps_low=eps_low, eps_high=eps_high, dual_clip_c=dual_clip_c, cispo_cap=cispo_cap)
    name = resolve_backend(logits, backend)
    if name != "triton":
        lp_fn = _reference if name == "torch" else functools.partial(chunked_token_logprobs, inplace=inplace)
        logp, H = lp_fn(logits, targets, temperature=temperature, entropy=entropy)
        return TokenLossOut(logp, H, *token_loss_terms(logp, old_logp, adv, mask, loss=loss, **hyper))
    check_inputs(logits, targets, temperature)
    shape = logits.shape[:-1]
    if len(shape) != 2 or old_logp.shape != shape or mask.shape != shape or adv.shape not in (shape, shape[:1]):
        raise ValueError(f"old_logp, mask, adv: expected (B, T) = {tuple(shape)} (adv also (B,)), got "
                         f"{tuple(old_logp.shape)}, {tuple(mask.shape)}, {tuple(adv.shape)}")
    if hyper.get("dual_clip_c") is not None and not hyper["dual_clip_c"] > 1:
        raise ValueError(f"dual_clip_c: expected None or a float > 1, got {hyper['dual_clip_c']}")
    A = adv.unsqueeze(-1).expand(shape) if adv.dim() == 1 else adv         # (B, T)
    lo, hi, c = kernel_bounds(loss, hyper)
    spec = KernelSpec(float(temperature), entropy, inplace, KERNEL_LOSSES[loss], lo, hi, c)
    logp, H, per_token, ratio, low, high, w = _triton_call(logits, targets, old_logp, A.detach(), mask, spec)
    return TokenLossOut(logp, H, per_token, ratio, low, high, w)


def linear_token_logprobs(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, *,
                          temperature: float = 1.0, entropy: bool = False, chunk_size: int | None = None,
                          backend: str = "auto") -> tuple[torch.Tensor, torch.Tensor | None]:
    """token_logprobs(hidden @ weight.T, targets) without ever holding the (N, V) logits.

    hidden (N, H), weight (V, H) (the lm_head, no bias), targets (N,) -> logp (N,), entropy (N,) or None.
    Backend "torch" materialises the logits (the reference); "chunked" and "triton" never do.
    """
    if hidden.dim() != 2 or weight.dim() != 2 or hidden.shape[1] != weight.shape[1]:
        raise ValueError(f"hidden, weight: expected (N, H) and (V, H), got {tuple(hidden.shape)} and "
                         f"{tuple(weight.shape)}")
    name = resolve_backend(hidden, backend)
    if name == "torch":
        return _reference(hidden @ weight.T, targets, temperature=temperature, entropy=entropy)
    check_inputs(hidden[:, :1], targets, temperature, vocab_size=weight.shape[0])  # targets (N,) long in [0, V)
    N, V = hidden.shape[0], weight.shape[0]
    chunk = linear_chunk_rows(N, hidden.shape[1], V, chunk_size)
    ops = TritonRows if name == "triton" else TorchRows
    logp, H = LinearTokenLogprobs.apply(hidden, weight, targets.long().contiguous(), float(temperature),
                                        entropy, chunk, ops)
    return logp, (H if entropy else None)
