"""The fused training path through the Triton kernels (``TRITON_INTERPRET=1`` on CPU) equals the reference.

Forward (log-probs, entropy, top-K log-probs) and backward (every parameter's gradient, the entropy bonus
included) of ``rlnb.models.forward.completion_logprobs`` on a tiny model with ragged prompts and completions.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
from transformers import LlamaForCausalLM  # noqa: E402

import rlnb.kernels as K  # noqa: E402
from rlnb.models import forward as F  # noqa: E402
from rlnb.models.tiny import build_config  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
if not K.triton_available():
    pytest.skip("Triton is not importable on this machine: nothing to test here", allow_module_level=True)


def tiny():
    torch.manual_seed(0)
    cfg = build_config(vocab_size=83, hidden_size=24, intermediate_size=48, num_hidden_layers=1,
                       num_attention_heads=2, num_key_value_heads=1)
    model = LlamaForCausalLM(cfg).to(DEVICE)
    gen = torch.Generator().manual_seed(5)
    B, Tp, T = 3, 4, 5                                                      # odd sizes on purpose
    prompt = torch.randint(3, 83, (B, Tp), generator=gen)
    pmask = torch.ones(B, Tp, dtype=torch.long)
    pmask[1, :2] = 0                                                        # left padding
    comp = torch.randint(3, 83, (B, T), generator=gen)
    mask = (torch.arange(T)[None] < torch.tensor([5, 2, 4])[:, None]).float()  # ragged completions
    return model, tuple(x.to(DEVICE) for x in (prompt, pmask, comp, mask))


def run(model, inputs, path: str, backend: str):
    K.set_backend(backend)
    try:
        with F.lm_head_path(path):
            model.zero_grad(set_to_none=True)
            out = F.completion_logprobs(model, *inputs, temperature=0.9, entropy=True, topk=3)
            m = inputs[3]
            (-(out.logp * m).sum() - 0.1 * (out.entropy * m).sum() + out.topk_logp.sum()).backward()
    finally:
        K.set_backend("auto")
    return out, [p.grad.clone() for p in model.parameters()]


def test_triton_fused_training_path_forward_and_backward_match_the_reference(monkeypatch):
    from rlnb.kernels import fused_linear
    model, inputs = tiny()
    calls = []
    for op in ("forward", "backward_"):
        real = getattr(fused_linear.TritonRows, op)
        monkeypatch.setattr(fused_linear.TritonRows, op,
                            staticmethod(lambda *a, _f=real, _op=op, **k: calls.append(_op) or _f(*a, **k)))
    fused, g_fused = run(model, inputs, "fused", "triton")
    assert "forward" in calls and "backward_" in calls                     # the kernels ran, both ways
    ref, g_ref = run(model, inputs, "reference", "torch")
    assert torch.equal(fused.topk_ids, ref.topk_ids)
    for name in ("logp", "entropy", "topk_logp"):
        torch.testing.assert_close(getattr(fused, name), getattr(ref, name), rtol=1e-5, atol=1e-5)
    assert (fused.logp[inputs[3] == 0] == 0).all()
    assert max(float(g.abs().max()) for g in g_ref) > 0
    for a, b in zip(g_fused, g_ref):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
