"""The fused LM head (the training path) gives the full-logits reference path's numbers.

Loss, per-token log-probs, entropy and every parameter's gradient, for every policy loss and aggregation in
the registries, on sampled batches with ragged completions (irregular B, T); and the training metrics of a
few whole steps of the embedded default, same seed.
"""

import functools
import inspect

import pytest
import torch

import rlnb
from rlnb.algos import AGGREGATIONS, POLICY_LOSSES
from rlnb.algos.losses import extra_inputs
from rlnb.models import forward as F
from rlnb.stages.update import loss_mask

TINY = dict(prompts_per_step=3, num_generations=3, max_new_tokens=7, entropy_coef=0.01)


@functools.cache
def sampled(loss: str):
    """A fp64 trainer for ``loss`` and one rewarded, advantaged batch, old log-probs moved so the ratio clips."""
    topk = {"topk_logprobs": 4} if "topk_logp" in extra_inputs(POLICY_LOSSES[loss]) else {}  # DPPO top-K
    required = {"dro_beta": 1.0} if loss == "dro" else {}                         # no default, as in verl
    t = rlnb.Trainer.tiny("grpo", task="add", loss=loss, **topk, **required, **TINY)
    t.model.double()
    batch = t.advantager.step(t.rollout())
    gen = torch.Generator().manual_seed(3)
    old = batch.old_logp + 0.3 * torch.randn(batch.old_logp.shape, generator=gen, dtype=batch.old_logp.dtype)
    return t, batch.replace(old_logp=old * batch.mask)


def loss_and_grads(t, batch, path: str):
    with F.lm_head_path(path):
        t.model.zero_grad(set_to_none=True)
        res = t.updater.loss(batch)
        total, out, ent = res.total, res.out, res.entropy
        total.backward()
    grads = [p.grad.clone() for p in t.model.parameters() if p.grad is not None]
    return total.detach(), ent, out, grads


@pytest.mark.parametrize("agg", list(AGGREGATIONS))
@pytest.mark.parametrize("loss", list(POLICY_LOSSES))
def test_fused_loss_and_gradients_equal_the_reference(loss, agg):
    t, batch = sampled(loss)
    fn = AGGREGATIONS[agg]
    bound = {"max_new_tokens": batch.mask.shape[1]} if "max_new_tokens" in inspect.signature(fn).parameters else {}
    t.updater.agg_fn = functools.partial(fn, **bound)
    ragged = loss_mask(batch).sum(-1)
    assert ragged.min() < ragged.max() or batch.mask.shape[1] % 2 == 1              # irregular shapes, not a full grid
    a, b = loss_and_grads(t, batch, "fused"), loss_and_grads(t, batch, "reference")
    assert torch.isfinite(a[0]) and a[0].abs() > 0 or b[0].abs() == 0
    torch.testing.assert_close(a[0], b[0], rtol=1e-5, atol=1e-6)          # the loss
    torch.testing.assert_close(a[1], b[1], rtol=1e-5, atol=1e-5)          # per-token entropy
    torch.testing.assert_close(a[2].ratio, b[2].ratio, rtol=1e-5, atol=1e-6)
    assert len(a[3]) == len(b[3]) > 0
    scale = max(float(g.abs().max()) for g in b[3])
    assert scale > 0                                                      # the gradient is not vacuous
    for ga, gb in zip(a[3], b[3]):
        torch.testing.assert_close(ga, gb, rtol=1e-4, atol=1e-5 * scale)


def test_per_token_logp_entropy_and_topk_equal_the_reference_with_temperature_and_fp32_head():
    t, batch = sampled("dppo_topk_tv")
    inputs = (batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.mask)
    kw = dict(temperature=0.7, entropy=True, fp32_lm_head=True, topk=4)
    a = F.completion_logprobs(t.model.float(), *inputs, **kw)
    with F.lm_head_path("reference"):
        b = F.completion_logprobs(t.model, *inputs, **kw)
    t.model.double()
    assert torch.equal(a.topk_ids, b.topk_ids)
    for name in ("logp", "entropy", "topk_logp"):
        torch.testing.assert_close(getattr(a, name), getattr(b, name), rtol=1e-5, atol=1e-5)
    assert (a.logp[batch.mask == 0] == 0).all() and (a.logp[batch.mask == 1] < 0).all()


def test_entropy_bonus_gradient_flows_through_the_fused_head():
    t, batch = sampled("ppo_clip")
    inputs = (batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.mask)
    grads = {}
    for path in F.LM_HEAD_PATHS:
        with F.lm_head_path(path):
            t.model.zero_grad(set_to_none=True)
            (F.completion_logprobs(t.model, *inputs, entropy=True).entropy.sum()).backward()
            grads[path] = t.model.get_output_embeddings().weight.grad.clone()
    assert grads["fused"].abs().max() > 0
    torch.testing.assert_close(grads["fused"], grads["reference"], rtol=1e-4, atol=1e-6)


def test_lm_head_path_rejects_unknown_names_and_restores():
    with pytest.raises(ValueError, match="name: expected one of"):
        with F.lm_head_path("full"):
            pass
    with F.lm_head_path("reference"):
        assert F.lm_head() == "reference"
    assert F.lm_head() == "fused"


def test_five_steps_of_the_embedded_default_match_the_reference_path():
    histories = {}
    for path in F.LM_HEAD_PATHS:
        with F.lm_head_path(path):
            t = rlnb.Trainer.tiny("grpo", task="countdown", format_weight=0.5, seed=0, prompts_per_step=4,
                                  num_generations=4, max_new_tokens=8, num_iterations=2, entropy_coef=0.01)
            t.run(5, progress=False)
            histories[path] = t.history
    fused, ref = histories["fused"], histories["reference"]
    assert len(fused) == len(ref) == 5
    for hf, hr in zip(fused, ref):
        assert set(hf) == set(hr)
        for key in ("loss", "entropy", "grad_norm", "pg_loss", "clip_ratio/region_mean", "reward"):
            assert hf[key] == pytest.approx(hr[key], rel=1e-4, abs=1e-6), key
    assert any(h["grad_norm"] > 0 for h in fused)
