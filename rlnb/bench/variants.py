"""What the loss benchmark runs: identical inputs, one objective, rlnb's paths and every installed peer.

Objective (the same for every variant): PPO clip (eps_low 0.2, eps_high 0.28) per token, token-mean
over the mask, and with ``entropy="grad"`` an entropy bonus ``- 0.01 * token-mean(H)``. Entropy modes:
``none`` (not computed), ``metric`` (computed, no gradient), ``grad`` (in the loss). A variant supplies
per-token ``(logp, H, loss)``; for peers that only give log-probs the loss is ``token_loss_terms``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

import rlnb.kernels as K
from rlnb.kernels.loss_terms import token_loss_terms
from rlnb.logprobs import token_logprobs

LOSS = dict(loss="ppo_clip", eps_low=0.2, eps_high=0.28)
ENT_COEF = 0.01
MODES = ("none", "metric", "grad")


@dataclass
class Inputs:
    x: torch.Tensor            # (B, T, V) logits, a leaf that requires grad
    x0: torch.Tensor           # (B, T, V) pristine copy: restores x after an in-place variant
    y: torch.Tensor            # (B, T) targets
    old: torch.Tensor          # (B, T) old_logp
    adv: torch.Tensor          # (B,) one advantage per sequence
    mask: torch.Tensor         # (B, T) 0/1
    xl: torch.Tensor | None = None  # (B, T + 1, V) Liger's layout (it drops the last position itself)


def make_inputs(B: int, T: int, V: int, *, dtype=torch.bfloat16, device="cpu", seed=0, liger=False) -> Inputs:
    """Logits ~ 2 N(0, 1), made a few rows at a time so that no full-size fp32 temporary exists."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x0 = torch.empty(B, T, V, dtype=dtype, device=device)
    flat = x0.view(-1, V)
    for i in range(0, B * T, 64):
        flat[i:i + 64] = torch.randn(min(64, B * T - i), V, generator=gen, device=device) * 2
    y = torch.randint(0, V, (B, T), generator=gen, device=device)
    with torch.no_grad():
        lp = K.token_logprobs(x0, y)[0]                                     # triton on CUDA, else chunked
    old = lp + 0.3 * torch.randn(B, T, generator=gen, device=device)       # ratios around 1: some clip
    adv = torch.randn(B, generator=gen, device=device)
    mask = (torch.rand(B, T, generator=gen, device=device) > 0.1).float()
    xl = torch.cat([x0, x0[:, :1]], dim=1).requires_grad_() if liger else None
    return Inputs(x0.clone().requires_grad_(), x0, y, old, adv, mask, xl)


def objective(loss, H, mask, mode: str) -> torch.Tensor:
    n = mask.sum()
    total = loss.sum() / n
    return total - ENT_COEF * (H * mask).sum() / n if mode == "grad" else total


def _terms(logp, H, inp):
    return logp, H, token_loss_terms(logp, inp.old, inp.adv, inp.mask, **LOSS)[0]


# --- variants: fn(inputs, mode) -> (logp, H or None, per-token loss) --------------------------------

def naive(inp: Inputs, mode: str):
    logp, H = token_logprobs(inp.x, inp.y, entropy=mode != "none")
    return _terms(logp, H.detach() if mode == "metric" else H, inp)


_COMPILED = {}


def compiled(inp: Inputs, mode: str):
    """torch.compile of the naive reference (entropy in the graph when it is asked for)."""
    key = mode != "none"
    if key not in _COMPILED:
        _COMPILED[key] = torch.compile(lambda x, y: token_logprobs(x, y, entropy=key))
    logp, H = _COMPILED[key](inp.x, inp.y)
    return _terms(logp, H.detach() if mode == "metric" else H, inp)


def trl(inp: Inputs, mode: str):
    """TRL's selective_log_softmax and entropy_from_logits (its CPU path: a loop of per-row log_softmax)."""
    from trl.trainer.utils import entropy_from_logits, selective_log_softmax
    logp = selective_log_softmax(inp.x, inp.y).float()
    H = None
    if mode == "grad":
        H = entropy_from_logits(inp.x).float()
    elif mode == "metric":
        with torch.no_grad():
            H = entropy_from_logits(inp.x).float()
    return _terms(logp, H, inp)


def _rlnb(backend: str, inplace: bool):
    def run(inp: Inputs, mode: str):
        out = K.fused_token_loss(inp.x, inp.y, inp.old, inp.adv, inp.mask, entropy=mode != "none",
                                 backend=backend, inplace=inplace, **LOSS)
        H = out.entropy.detach() if mode == "metric" else out.entropy
        return out.logp, H, out.loss
    run.__name__ = f"rlnb_{backend}{'_inplace' if inplace else ''}"
    return run


def liger(inp: Inputs, mode: str):
    """Liger's Triton GRPO loss ("dapo" = PPO clip per token, beta 0): logits-level, CUDA only.

    It returns no log-probs or entropy, so it runs in mode "none" only; it reads (B, T + 1, V) logits.
    """
    from liger_kernel.transformers.grpo_loss import triton_grpo_loss
    loss, _, _ = triton_grpo_loss(inp.xl, inp.old, None, inp.y, inp.adv, inp.mask, temperature=1.0, beta=0.0,
                                  eps_low=LOSS["eps_low"], eps_high=LOSS["eps_high"], inplace=True,
                                  loss_type="dapo", reduce=False)
    return None, None, loss


def peer_available(name: str) -> str | None:
    """None if the peer imports, else why not."""
    try:
        if name == "trl":
            import trl.trainer.utils  # noqa: F401
        elif name == "liger":
            import liger_kernel.transformers.grpo_loss  # noqa: F401
        elif name == "compile":
            if not hasattr(torch, "compile"):
                return "torch.compile missing"
    except Exception as e:  # noqa: BLE001 - any import failure means "not usable here"
        return f"not installed ({type(e).__name__}: {str(e)[:60]})"
    return None


CPU_VARIANTS = {"naive_fp32": naive, "torch_compile": compiled, "trl": trl,
                "rlnb_chunked": _rlnb("chunked", False), "rlnb_chunked_inplace": _rlnb("chunked", True)}
GPU_VARIANTS = {**CPU_VARIANTS, "liger": liger, "rlnb_triton": _rlnb("triton", False),
                "rlnb_triton_inplace": _rlnb("triton", True)}
PEER_OF = {"torch_compile": "compile", "trl": "trl", "liger": "liger"}


def _leaf(fn, inp: Inputs) -> torch.Tensor:
    return inp.xl if fn is liger else inp.x


def restore(fn, inp: Inputs) -> None:
    """Put the pristine logits back (an in-place variant overwrote them) and drop the old gradient."""
    leaf = _leaf(fn, inp)
    with torch.no_grad():
        leaf[:, :inp.x0.shape[1]].copy_(inp.x0)
    leaf.grad = None


def step(fn, inp: Inputs, mode: str):
    """One forward + backward; the outputs (detached) and the (B, T, V) logits gradient."""
    leaf = _leaf(fn, inp)
    leaf.grad = None
    logp, H, loss = fn(inp, mode)
    objective(loss, H, inp.mask, mode).backward()
    grad = leaf.grad[:, :inp.x0.shape[1]]
    return tuple(t.detach() if t is not None else None for t in (logp, H, loss)) + (grad,)


def run_once(fn, inp: Inputs, mode: str):
    restore(fn, inp)
    return step(fn, inp, mode)


def fp64_gate(inp: Inputs, out, mode: str, rows: torch.Tensor) -> dict:
    """Errors of a variant's outputs on flat token ``rows`` against fp64 (the global normaliser is kept)."""
    logp, H, loss, grad = out
    B, T, V = inp.x0.shape
    b, t = rows // T, rows % T
    x = inp.x0[b, t].double().requires_grad_()                             # (R, V)
    p = torch.softmax(x, -1)
    lp64 = torch.log(p.gather(-1, inp.y[b, t, None]).squeeze(-1))
    H64 = -(p * torch.log(p)).sum(-1)
    m = inp.mask[b, t].double()
    row = lambda v: v.double().unsqueeze(0)  # noqa: E731 - the zoo's losses take (B, T): here (1, R)
    loss64 = token_loss_terms(row(lp64), row(inp.old[b, t]), row(inp.adv[b]), row(m), **LOSS)[0].squeeze(0)
    n = inp.mask.sum().double()
    (loss64.sum() / n - (ENT_COEF * (H64 * m).sum() / n if mode == "grad" else 0)).backward()
    err = {"loss": (loss[b, t].double() - loss64).abs().max().item(),
           "grad": (grad[b, t].double() - x.grad).abs().max().item()}
    if logp is not None:
        err["logp"] = (logp[b, t].double() - lp64).abs().max().item()
    if H is not None:
        err["entropy"] = (H[b, t].double() - H64).abs().max().item()
    g_max = x.grad.abs().max().item()
    ulp = 2.0 ** (math.floor(math.log2(g_max)) - 7) if grad.dtype == torch.bfloat16 else 1e-6 * g_max
    tol = {"logp": 1e-4, "loss": 1e-4, "entropy": 1e-4, "grad": ulp}  # fp32 reductions; one bf16 ulp
    err["passed"] = all(err[k] <= tol[k] for k in tol if k in err)
    return err


# --- shared by the CPU and GPU tiers -----------------------------------------------------------
def _gate_rows(inp) -> torch.Tensor:
    n = inp.y.numel()
    return torch.unique(torch.tensor([0, 1, 2, n // 3, n // 2, n - 2, n - 1], device=inp.y.device).clamp(0, n - 1))


def select(table: dict, names: str | None, device: str) -> tuple[dict, dict]:
    """The variants to run and, for each left out, why."""
    chosen, skipped = {}, {}
    for name, fn in table.items():
        if names and name not in names.split(","):
            continue
        why = peer_available(PEER_OF[name]) if name in PEER_OF else None
        if name == "liger" and device != "cuda":
            why = why or "CUDA only (Triton kernels)"
        chosen.update({} if why else {name: fn})
        skipped.update({name: why} if why else {})
    return chosen, skipped


def gate_all(chosen, inp, mode) -> dict:
    gates = {}
    for name, fn in chosen.items():
        try:
            gates[name] = fp64_gate(inp, run_once(fn, inp, mode), mode, _gate_rows(inp))
        except Exception as e:  # noqa: BLE001 - a peer that breaks is reported, not fatal
            gates[name] = {"passed": False, "error": f"{type(e).__name__}: {str(e)[:200]}"}
    return gates


def format_table(res: dict) -> str:
    head = (f"{res['tier']} tier: B={res['B']} T={res['T']} (N={res['B'] * res['T']}) V={res['V']} "
            f"{res['dtype']} entropy={res['entropy']}")
    cols = "variant                 gate  max|grad err|  peak extra MB  x grad buf  median s  ratio"
    lines = [head, cols, "-" * len(cols)]
    for name, r in res["variants"].items():
        g = r["gate"]
        gate = "ok" if g.get("passed") else ("ERR" if "error" in g else "FAIL")
        err = f"{g['grad']:.2e}" if "grad" in g else "-"
        mb = r.get("extra_mb")
        buf = f"{mb / r['grad_mb']:.2f}x" if mb is not None and r.get("grad_mb") else "-"
        ratio = f"{r['ratio_vs_naive']:.3f}" if "ratio_vs_naive" in r else "-"
        secs = f"{r['seconds']:.3f}" if "seconds" in r else "-"
        lines.append(f"{name:<22}  {gate:<4}  {err:>12}  {mb if mb is None else round(mb, 1)!s:>13}  "
                     f"{buf:>10}  {secs:>8}  {ratio:>5}")
        if "error" in g or "error" in r:
            lines.append(f"    error: {g.get('error') or r.get('error')}")
        elif not g.get("passed"):
            lines.append("    fp64 errors: " + ", ".join(f"{k} {v:.2e}" for k, v in g.items() if k != "passed"))
    for name, why in res.get("skipped", {}).items():
        lines.append(f"{name:<22}  {why}")
    return "\n".join(lines)
