"""The last verl entries through a real Trainer: GDPO reads the Rewarder's parts and weights, the optimal
token baseline reads the Sampler's sum of squared probabilities and gives per-token advantages."""

import torch

import rlnb
from rlnb.algos import ADVANTAGES

TINY = dict(prompts_per_step=4, num_generations=4, max_new_tokens=8)


class _Keep:
    """A callback that keeps each stage's batch, and the naive sum pi^2 at sampling time."""

    def __init__(self):
        self.batches, self.pi2 = {}, None

    def on_stage(self, trainer, stage, batch):
        self.batches[stage] = batch
        if stage == "sample":
            self.pi2 = _naive_sum_pi_squared(trainer.model, batch, trainer.recipe.temperature)


def _naive_sum_pi_squared(model, b, temperature):
    """One unpadded forward per row (no batching, no position-id bookkeeping): the oracle."""
    out = torch.zeros(b.mask.shape)
    was = model.training
    model.eval()
    with torch.no_grad():
        for i in range(b.B):
            prompt = b.prompt_ids[i][b.prompt_mask[i].bool()].tolist()
            L = int(b.mask[i].sum())
            ids = torch.tensor([prompt + b.completion_ids[i, :L].tolist()])
            logits = model(input_ids=ids).logits[0, len(prompt) - 1 : len(prompt) - 1 + L].float()
            out[i, :L] = (torch.softmax(logits / temperature, -1) ** 2).sum(-1)
    model.train(was)
    return out


def _grpo_part(x, G, eps=1e-6):
    g = x.double().view(-1, G)
    return ((g - g.mean(1, keepdim=True)) / (g.std(1, keepdim=True) + eps)).reshape(-1)


def test_gdpo_normalises_the_rewarders_parts_with_its_weights_on_a_trainer_step():
    t = rlnb.Trainer.tiny("gdpo", task="add", format_weight=0.5, **TINY)  # 8 tokens: the format varies
    rec = t.step()
    b, G = rec.batch, rec.batch.group_size
    parts = b.reward_parts
    assert list(parts) == ["correct", "format"]
    assert torch.equal(b.extras["reward_weights"], torch.tensor([[1.0, 0.5]]).expand(b.B, 2))
    torch.testing.assert_close(parts["correct"] + 0.5 * parts["format"], b.rewards)
    spread = lambda x: (x.view(-1, G).std(1) > 0)  # noqa: E731
    assert spread(parts["format"]).any(), "the test needs a group whose format varies (seed 0 has one)"
    summed = _grpo_part(parts["correct"], G) + 0.5 * _grpo_part(parts["format"], G)        # (B,)
    tokens = summed.repeat_interleave(b.lengths)                        # verl whitens over valid tokens
    want = (summed - tokens.mean()) / torch.sqrt(tokens.var() + 1e-8)
    torch.testing.assert_close(b.adv, want.float())
    assert b.adv.abs().sum() > 0


def test_optimal_token_baseline_gets_sum_pi_squared_and_gives_per_token_advantages():
    t = rlnb.Trainer.tiny("grpo", task="countdown", advantage="optimal_token_baseline", temperature=0.7, **TINY)
    assert t.sampler.record_sum_pi_squared and not rlnb.Trainer.tiny("grpo", **TINY).sampler.record_sum_pi_squared
    keep = _Keep()
    rec = t.step(callbacks=[keep])
    b, G = rec.batch, rec.batch.group_size
    s2 = b.extras["sum_pi_squared"]
    torch.testing.assert_close(s2, keep.pi2, atol=1e-5, rtol=1e-4)     # at the sampling temperature
    assert ((s2 > 0) & (s2 <= 1 + 1e-6))[b.mask.bool()].all() and (s2[b.mask == 0] == 0).all()
    assert keep.batches["sample"].old_logp is not None                 # the estimator reads pi_old before the update
    assert b.adv.shape == b.mask.shape and (b.adv[b.mask == 0] == 0).all()
    torch.testing.assert_close(b.adv, ADVANTAGES["optimal_token_baseline"](b.rewards, G, b.old_logp, s2, b.mask))
    per_row = b.adv.view(-1, G, b.adv.shape[1])
    assert (per_row.abs().sum((1, 2)) > 0).any(), "the test needs a group with signal (seed 0 has one)"
    assert not torch.allclose(b.adv[:, 0], ADVANTAGES["dr_grpo"](b.rewards, G))  # not just the group mean
