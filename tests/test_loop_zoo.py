"""The zoo's newer entries through the Trainer: ReMax's greedy baseline end to end (the Sampler decodes it,
the Rewarder scores it, the Advantager passes it), and every new entry trains for two steps."""

import pytest
import torch

import rlnb
from rlnb.algos import ADVANTAGES, AGGREGATIONS, KL_ESTIMATORS, POLICY_LOSSES, extra_inputs

TINY = dict(prompts_per_step=2, num_generations=2, max_new_tokens=8)


def _naive_greedy(model, tok, prompt: str, max_new_tokens: int) -> str:
    """Argmax decoding with a full forward pass per token (no KV cache, no padding): the oracle."""
    ids = tok(prompt)["input_ids"]
    out = []
    was = model.training
    model.eval()
    with torch.no_grad():
        for _ in range(max_new_tokens):
            nxt = int(model(input_ids=torch.tensor([ids + out])).logits[0, -1].argmax())
            out.append(nxt)
            if nxt == tok.eos_token_id:
                break
    model.train(was)
    return tok.decode(out, skip_special_tokens=True)


class _Oracle:
    """A callback that decodes each prompt greedily the naive way right after sampling (the weights the
    Sampler used) and keeps the batch each stage produced."""

    def __init__(self):
        self.greedy, self.batches = None, {}

    def on_stage(self, trainer, stage, batch):
        self.batches[stage] = batch
        if stage == "sample":
            G = batch.group_size
            self.greedy = [_naive_greedy(trainer.model, trainer.tokenizer, p, trainer.recipe.max_new_tokens)
                           for p in batch.prompts[::G]]


def test_remax_baseline_is_the_reward_of_each_prompts_greedy_rollout():
    t = rlnb.Trainer.tiny("grpo", task="countdown", advantage="remax", format_weight=0.5, **TINY)
    assert t.sampler.greedy and not rlnb.Trainer.tiny("grpo", **TINY).sampler.greedy
    oracle = _Oracle()
    rec = t.step(callbacks=[oracle])
    b, G = rec.batch, rec.batch.group_size
    assert b.extras["greedy_completions"] == [g for g in oracle.greedy for _ in range(G)]
    funcs = t.task.reward_funcs()
    prompts, answers = b.prompts[::G], b.answers[::G]
    score = lambda name: torch.tensor(funcs[name](oracle.greedy, answers, prompts=prompts))  # noqa: E731
    baseline = (score("correct") + 0.5 * score("format")).repeat_interleave(G)
    torch.testing.assert_close(b.extras["greedy_rewards"], baseline.float())
    torch.testing.assert_close(b.adv, b.rewards - baseline)            # A_i = r_i - r(greedy of its prompt)
    torch.testing.assert_close(b.adv.view(-1, G).sum(1), b.rewards.view(-1, G).sum(1) - G * baseline[::G])
    assert b.adv.abs().sum() > 0 and baseline.abs().sum() > 0, "the test needs a step with signal (seed 0 has it)"
    assert "greedy_rewards" not in oracle.batches["sample"].extras      # written by the Rewarder, not before


def test_the_greedy_rollout_leaves_the_sampling_stream_alone():
    """ReMax and Dr. GRPO sample alike; the greedy decoding draws nothing, so step 1's completions and the
    sampling generator's state afterwards are the same."""
    remax = rlnb.Trainer.tiny("grpo", advantage="remax", **TINY)
    other = rlnb.Trainer.tiny("grpo", advantage="dr_grpo", **TINY)
    a, b = remax.step().batch, other.step().batch
    assert a.completions == b.completions and torch.equal(a.completion_ids, b.completion_ids)
    assert torch.equal(remax.generators["sample"].get_state(), other.generators["sample"].get_state())
    assert "greedy_completions" in a.extras and "greedy_completions" not in b.extras


def test_remax_with_dynamic_sampling_keeps_each_rows_own_greedy_baseline():
    t = rlnb.Trainer.tiny("grpo", task="countdown", advantage="remax", format_weight=0.5, max_gen_rounds=3,
                          filters=("dynamic_sampling",), **TINY)
    rec = t.step()
    b, G = rec.batch, rec.batch.group_size
    assert rec.metrics["gen_rounds"] > 1, "the test needs a step that refills (seed 0 has it)"
    greedy = b.extras["greedy_completions"]
    assert len(greedy) == b.B and all(greedy[i] == greedy[i - i % G] for i in range(b.B))
    torch.testing.assert_close(b.adv, b.rewards - b.extras["greedy_rewards"])


def test_batch_concat_and_select_carry_string_extras_row_by_row():
    rows = {"prompt": ["a", "b"], "answer": ["1", "2"]}
    one = rlnb.Batch.from_rows(rows, 2).replace(extras={"greedy_completions": ["x", "x", "y", "y"]})
    two = rlnb.Batch.from_rows({"prompt": ["c"], "answer": ["3"]}, 2).replace(extras={"greedy_completions": ["z", "z"]})
    both = rlnb.Batch.concat([one, two])
    assert both.extras["greedy_completions"] == ["x", "x", "y", "y", "z", "z"] and both.prompts[4] == "c"
    assert both.select(torch.tensor([2, 3, 4, 5])).extras["greedy_completions"] == ["y", "y", "z", "z"]


NEW = [("advantage", n) for n in ("reinforce_plus_plus", "reinforce_plus_plus_baseline", "remax", "opo", "grpo_passk",
                                  "vineppo")] \
    + [("loss", n) for n in ("clip_cov", "kl_cov", "geo_mean")] + [("aggregation", "token-sum")] \
    + [("kl_estimator", "abs")] \
    + [("advantage", n) for n in ("gdpo", "gpg", "optimal_token_baseline", "tir_optimal_token_baseline")] \
    + [("loss", "dro"), ("kl_estimator", "k1+"), ("kl_estimator", "abs+"), ("loss", "vespo")]
NO_DEFAULT = {"dro": {"dro_beta": 1.0}}  # a knob without a default (as in verl) is set
REGISTRY = {"advantage": ADVANTAGES, "loss": POLICY_LOSSES, "aggregation": AGGREGATIONS, "kl_estimator": KL_ESTIMATORS}


@pytest.mark.parametrize("field, name", NEW)
def test_each_new_entry_is_chosen_by_a_recipe_and_trains_two_steps(field, name):
    extra = {"beta": 0.05} if field == "kl_estimator" else {}
    t = rlnb.Trainer.tiny("grpo", task="countdown", format_weight=0.5, num_iterations=2, num_mini_batches=2,
                          **{field: name}, **extra, **NO_DEFAULT.get(name, {}), **TINY)
    bound = {"advantage": t.advantager.estimator, "loss": t.updater.loss_fn, "aggregation": t.updater.agg_fn,
             "kl_estimator": t.updater.kl_fn}[field]
    assert bound.func is REGISTRY[field][name]
    before = [p.detach().clone() for p in t.model.parameters()]
    t.run(2, progress=False)
    assert t.step_count == 2 and all(torch.isfinite(torch.tensor(h["loss"])) for h in t.history)
    assert t.history[-1]["num_updates"] == 4                           # 2 epochs x 2 mini-batches
    moved = any(not torch.equal(a, p) for a, p in zip(before, t.model.parameters()))
    assert moved == any(h["grad_norm"] > 0 for h in t.history)
    if field == "advantage":
        adv = t.records[-1].batch.adv
        assert torch.isfinite(adv).all() and t.sampler.greedy == ("greedy_rewards" in extra_inputs(bound))


def test_top_entropy_quantile_keeps_the_gradient_to_the_high_entropy_tokens():
    from rlnb.algos import top_entropy_mask

    t = rlnb.Trainer.tiny("dapo", task="countdown", prompts_per_step=4, num_generations=4, max_new_tokens=8,
                          top_entropy_quantile=0.2, filters=(), max_gen_rounds=1)
    batch = t.advantager.step(t.rollout())
    res = t.updater.loss(batch)
    terms, out, ent, m = res.terms, res.out, res.entropy, res.mask
    keep = top_entropy_mask(ent, m, top_entropy_quantile=0.2)
    assert 0 < keep.sum() < m.sum()                                     # a minority of the valid tokens
    assert torch.allclose(terms["pg"], (out.loss * keep).sum() / m.sum())   # token-mean over every token
    logp = torch.zeros_like(m, requires_grad=True)                       # where the gradient reaches
    loss = t.updater.agg_fn(t.updater.loss_fn(logp, logp.detach(), batch.adv, m).loss * keep, m, group_size=4)
    loss.backward()
    assert (logp.grad[~keep] == 0).all() and (logp.grad[keep & (batch.adv[:, None] != 0).expand_as(m)] != 0).all()
