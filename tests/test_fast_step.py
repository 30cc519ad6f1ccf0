"""The fast step: pi_old from the update's own forward, the rollout's own log-probs, lean decoding.

Not timed (speed lives in scripts/bench_vs_trl.py); these check that the fast path computes what the
reference path computes.
"""

import pytest
import torch

import rlnb
from rlnb.models.forward import completion_logprobs
from rlnb.models.generate import sample
from rlnb.stages import sample as sample_mod

SMALL = dict(prompts_per_step=4, num_generations=4, max_new_tokens=16)


def staged_batch(trainer):
    """One batch through Sampler (recomputing old_logp), Rewarder and Advantager, by hand."""
    return trainer.advantager.step(trainer.rewarder.step(trainer.sampler.step(trainer.next_prompts())))


def loss_and_grads(trainer, batch):
    trainer.model.zero_grad(set_to_none=True)
    res = trainer.updater.loss(batch)
    total, out, m, old = res.total, res.out, res.mask, res.old_logp
    total.backward()
    grads = {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
    return total.detach(), grads, out.ratio, m.bool(), old


def test_fast_path_losses_and_gradients_equal_the_reference_path():
    trainer = rlnb.Trainer.tiny("grpo", **SMALL)
    batch = staged_batch(trainer)
    batch = batch.replace(adv=torch.linspace(-1.5, 1.5, batch.B))    # signed advantages: a gradient to compare
    assert batch.old_logp is not None and batch.rollout_logp is not None
    ref_total, ref_grads, ref_ratio, m, _ = loss_and_grads(trainer, batch)              # recomputed old_logp
    fast_total, fast_grads, fast_ratio, _, old = loss_and_grads(trainer, batch.replace(old_logp=None))
    assert torch.equal(old, batch.old_logp)         # the update's own forward, detached: the same numbers
    assert torch.equal(fast_total, ref_total)
    assert fast_grads.keys() == ref_grads.keys() and len(ref_grads) > 0
    for name, g in ref_grads.items():
        assert torch.equal(fast_grads[name], g), name
    assert torch.equal(fast_ratio[m], torch.ones_like(fast_ratio[m])) and torch.equal(ref_ratio[m], fast_ratio[m])
    assert any(g.abs().sum() > 0 for g in ref_grads.values())


def test_trainer_step_skips_the_recompute_and_the_first_ratio_is_exactly_one(monkeypatch):
    trainer = rlnb.Trainer.tiny("grpo", **SMALL)
    calls = []
    real = sample_mod.completion_logprobs
    monkeypatch.setattr(sample_mod, "completion_logprobs", lambda *a, **k: calls.append(1) or real(*a, **k))
    rec = trainer.step()
    assert calls == []                               # no recomputing forward in the Sampler
    m = rec.batch.mask.bool()
    assert torch.equal(rec.stats.ratio[m], torch.ones(int(m.sum())))
    assert torch.equal(rec.batch.old_logp, rec.stats.old_logp)       # recorded on the step's batch
    assert (rec.batch.old_logp[~m] == 0).all() and (rec.batch.old_logp[m] < 0).all()
    diff = rec.metrics["sampling/sampling_logp_difference/mean"]
    assert 0 <= diff < 1e-3 and rec.metrics["sampling/sampling_logp_difference/max"] >= diff
    assert trainer.sampler.recompute_old_logp    # a stage run by hand still recomputes
    assert trainer.sampler.step(trainer.next_prompts()).old_logp is not None and calls == [1]


def test_off_policy_steps_still_recompute_and_need_old_logp(monkeypatch):
    trainer = rlnb.Trainer.tiny("grpo", num_iterations=2, **SMALL)
    batch = staged_batch(trainer)
    with pytest.raises(ValueError, match="old_logp"):
        trainer.updater.step(batch.replace(old_logp=None))
    calls = []
    real = sample_mod.completion_logprobs
    monkeypatch.setattr(sample_mod, "completion_logprobs", lambda *a, **k: calls.append(1) or real(*a, **k))
    trainer.step()
    assert calls == [1]


def test_sampling_log_probs_match_a_full_forward_and_finished_rows_match_single_row_decoding():
    model, tok = rlnb.load_default()
    model.eval()
    prompts = rlnb.tasks.get("add").dataset(12, seed=3)["prompt"]
    enc = tok(list(prompts), padding=True, return_tensors="pt")
    kw = dict(max_new_tokens=20, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, greedy=True,
              return_logp=True)
    ids, mask, truncated, logp = sample(model, enc["input_ids"], enc["attention_mask"], **kw)
    lengths = mask.sum(-1).long()
    assert lengths.min() < lengths.max()            # rows finish at different steps: some leave early
    with torch.no_grad():
        full = completion_logprobs(model, enc["input_ids"], enc["attention_mask"], ids, mask).logp
    torch.testing.assert_close(logp, full, atol=1e-4, rtol=0)        # same policy, another code path
    assert (logp[~mask.bool()] == 0).all() and (ids[~mask.bool()] == tok.pad_token_id).all()
    for i in range(len(prompts)):                   # each row alone decodes the same tokens
        one = tok([prompts[i]], return_tensors="pt")
        ids_i, mask_i, trunc_i, _ = sample(model, one["input_ids"], one["attention_mask"], **kw)
        n = int(lengths[i])
        assert int(mask_i.sum()) == n and torch.equal(ids_i[0, :n], ids[i, :n]) and bool(trunc_i) == bool(truncated[i])
    ends_with_eos = ids[torch.arange(len(prompts)), lengths - 1] == tok.eos_token_id
    assert torch.equal(truncated, ~ends_with_eos)
