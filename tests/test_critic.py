"""The critic helpers: outcome rewards per token, the masked error and spread, and GAE's two limits against
a Monte-Carlo target."""

import pytest
import torch

import rlnb
from rlnb.notebook.critic import current_values, gae_tradeoff, masked_rmse, masked_std, outcome_token_rewards


def test_outcome_token_rewards_put_the_reward_on_the_last_valid_token():
    out = outcome_token_rewards(torch.tensor([1.0, 0.0, 0.5]), torch.tensor([[1, 1, 1], [1, 0, 0], [1, 1, 0]]))
    assert out.tolist() == [[0, 0, 1], [0, 0, 0], [0, 0.5, 0]]
    with pytest.raises(ValueError, match="rewards, mask"):
        outcome_token_rewards(torch.ones(2), torch.ones(3, 4))


def test_masked_error_and_spread_by_hand():
    x, t, m = torch.tensor([[3.0, 1.0, 9.0]]), torch.tensor([[0.0, 1.0, 0.0]]), torch.tensor([[1, 1, 0]])
    assert masked_rmse(x, t, m) == pytest.approx((9 / 2) ** 0.5)
    assert masked_std(x, m) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="mask"):
        masked_std(x, torch.zeros(1, 3))


def test_gae_tradeoff_limits():
    # one completion of 3 tokens, reward 1, critic V = (.5, .5, .5); MC target = the critic's own differences
    r = torch.tensor([[0.0, 0.0, 1.0]])
    v = torch.tensor([[0.5, 0.5, 0.5]])
    m = torch.ones(1, 3)
    lam0_target = torch.tensor([[0.0, 0.0, 0.5]])                 # delta_t = r_t + V_{t+1} - V_t (V_3 = 0)
    out = gae_tradeoff(r, v, m, lam0_target, lams=[0.0, 1.0])
    assert out["error"][0] == pytest.approx(0.0)                  # lambda = 0 is one-step TD exactly
    # lambda = 1: A_t = R - V_t = 0.5 on every token (Monte Carlo): spread 0, error vs target sqrt(.5/3)
    assert out["spread"][1] == pytest.approx(0.0, abs=1e-12)
    assert out["error"][1] == pytest.approx((0.5 / 3) ** 0.5)


def test_current_values_read_the_value_head_on_valid_tokens():
    t = rlnb.Trainer.tiny("ppo", seed=0, prompts_per_step=2, num_generations=2)
    rec = t.step()
    with pytest.raises(ValueError, match="value head"):
        current_values(rlnb.Trainer.tiny("grpo", prompts_per_step=2, num_generations=2), rec.batch)
    with torch.no_grad():
        t.value_head.proj.weight.zero_()
        t.value_head.proj.bias.fill_(0.5)                         # V = 0.5 on every state
    now = current_values(t, rec.batch)
    valid = rec.batch.mask.bool()
    assert now.shape == valid.shape
    assert torch.all(now[valid] == 0.5) and torch.all(now[~valid] == 0)
