"""Training a tiny model through the Triton path gives the reference path's metrics, step by step.

``train_metrics(model, batch, backend=...)`` is the comparison the Updater should pass too: the lead can
swap its body for ``Updater(...).step(batch)`` once the loop exists and keep the assertions.
"""

import copy
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
from transformers import LlamaForCausalLM  # noqa: E402

import rlnb.kernels as K  # noqa: E402
from rlnb.models.tiny import build_config  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
if not K.triton_available():
    pytest.skip("Triton is not importable on this machine: nothing to test here", allow_module_level=True)


def tiny_model(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    cfg = build_config(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=2, num_key_value_heads=2)
    return LlamaForCausalLM(cfg).to(DEVICE)


def tiny_batch(seed: int = 1, B: int = 4, P: int = 5, T: int = 7) -> dict:
    """Random prompts + completions, ragged completion masks, group-centred advantages, stale old_logp."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, 97, (B, P + T), generator=gen)
    lengths = torch.tensor([7, 4, 6, 2])[:B]
    mask = (torch.arange(T)[None, :] < lengths[:, None]).float()           # (B, T)
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5])[:B]                          # (B,)
    old_shift = 0.4 * torch.randn(B, T, generator=gen)                     # rho != 1: clipping fires
    return {"ids": ids.to(DEVICE), "T": T, "mask": mask.to(DEVICE), "adv": adv.to(DEVICE),
            "old_shift": old_shift.to(DEVICE)}


def train_metrics(model, batch, *, backend: str, steps: int = 3, lr: float = 1e-2) -> list[dict]:
    """A few PPO-clip steps (token-mean loss, entropy bonus) on a copy of ``model``; per-step metrics."""
    model = copy.deepcopy(model).train()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    ids, T, mask = batch["ids"], batch["T"], batch["mask"]
    with torch.no_grad():
        logits = model(ids).logits[:, -T - 1:-1]
        old = K.token_logprobs(logits, ids[:, -T:], backend="torch")[0] + batch["old_shift"]
    history = []
    for _ in range(steps):
        logits = model(ids).logits[:, -T - 1:-1]                            # (B, T, V)
        out = K.fused_token_loss(logits, ids[:, -T:], old, batch["adv"], mask, loss="ppo_clip",
                                 eps_low=0.2, eps_high=0.28, entropy=True, backend=backend)
        n = mask.sum()
        loss = out.loss.sum() / n - 0.01 * (out.entropy * mask).sum() / n
        opt.zero_grad()
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)
        opt.step()
        history.append({"loss": loss.item(), "entropy": ((out.entropy * mask).sum() / n).item(),
                        "clip_low": out.clipped_low.float().sum().item(),
                        "clip_high": out.clipped_high.float().sum().item(), "grad_norm": grad_norm.item()})
    history.append({"params": torch.cat([p.detach().flatten() for p in model.parameters()])})
    return history


def test_triton_training_matches_reference_metrics():
    model, batch = tiny_model(), tiny_batch()
    ref = train_metrics(model, batch, backend="torch")
    for backend in ("chunked", "triton"):
        got = train_metrics(model, batch, backend=backend)
        for step, (a, b) in enumerate(zip(ref[:-1], got[:-1], strict=True)):
            for key in ("loss", "entropy", "grad_norm"):
                assert abs(a[key] - b[key]) <= 1e-4 * (1 + abs(a[key])), (backend, step, key, a[key], b[key])
            assert (a["clip_low"], a["clip_high"]) == (b["clip_low"], b["clip_high"]), (backend, step)
        assert (ref[-1]["params"] - got[-1]["params"]).abs().max() < 1e-4, backend
    assert ref[0]["clip_low"] + ref[0]["clip_high"] > 0        # the batch exercises the clipped branches
    assert ref[-2]["loss"] < ref[0]["loss"]                     # and the steps move the loss
