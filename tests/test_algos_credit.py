"""VinePPO's per-token advantages: hand-computed values, the telescoping sum, and a Trainer step with them."""

import pytest
import torch

from rlnb.algos import ADVANTAGES, extra_inputs
from rlnb.algos.advantages_credit import vineppo


def test_hand_computed_values():
    # row 0: r = 1, V = .5, .75 over its 2 tokens -> A = .75 - .5, 1 - .75, then 0 (padding)
    # row 1: r = 0, V = .5, .25, .5 over its 3 tokens -> A = -.25, +.25, 0 - .5
    V = torch.tensor([[0.5, 0.75, 0.9, 0.9], [0.5, 0.25, 0.5, 0.0]])
    adv = vineppo(torch.tensor([1.0, 0.0]), 2, V, torch.tensor([2, 3]))
    assert torch.allclose(adv, torch.tensor([[0.25, 0.25, 0.0], [-0.25, 0.25, -0.5]]))


def test_last_token_gets_the_rewarders_reward_and_the_sum_telescopes():
    torch.manual_seed(0)
    V = torch.rand(6, 9)                                                # values need not end at the reward
    r, n = torch.tensor([1.0, 0.0, 1.5, 0.0, 1.0, 0.3]), torch.tensor([8, 1, 5, 3, 8, 2])
    adv = vineppo(r, 3, V, n)
    assert adv.shape == (6, 8)
    assert torch.allclose(adv.sum(-1), r - V[:, 0], atol=1e-6)          # sum_t A_t = r - V(prompt)
    pad = torch.arange(8)[None, :] >= n[:, None]
    assert (adv[pad] == 0).all()
    assert adv[1, 0] == pytest.approx(0.0 - V[1, 0].item())           # one token: r - V(s_0)


def test_prompt_value_alone_is_the_sequence_baseline():
    adv = vineppo(torch.tensor([1.0, 0.0, 3.0]), 1, torch.tensor([0.5, 0.5, 1.0]))
    assert torch.equal(adv, torch.tensor([0.5, -0.5, 2.0]))


def test_registered_with_its_extra_inputs():
    assert ADVANTAGES["vineppo"] is vineppo
    assert extra_inputs(vineppo) == ("prefix_values", "lengths")
    assert "2410.01679" in vineppo.__doc__


def test_bad_inputs_name_the_tensor():
    r = torch.tensor([1.0, 0.0])
    with pytest.raises(ValueError, match="prefix_values: the advantage estimator 'vineppo' needs"):
        vineppo(r, 2)
    with pytest.raises(ValueError, match="lengths: the advantage estimator 'vineppo' needs"):
        vineppo(r, 2, torch.zeros(2, 4))
    with pytest.raises(ValueError, match=r"lengths: expected token counts in 1..3"):
        vineppo(r, 2, torch.zeros(2, 4), torch.tensor([2, 4]))
    with pytest.raises(ValueError, match=r"prefix_values: expected shape \(2, T \+ 1\)"):
        vineppo(r, 2, torch.zeros(3, 4), torch.tensor([2, 2]))
    with pytest.raises(ValueError, match="prefix_values: expected a finite"):
        vineppo(r, 2, torch.full((2, 4), float("nan")), torch.tensor([2, 2]))


def test_a_trainer_step_computes_prefix_values_and_per_token_advantages():
    import rlnb

    t = rlnb.Trainer.tiny("grpo", advantage="vineppo", mc_rollouts=2, prompts_per_step=2, num_generations=2,
                          max_new_tokens=26, seed=0)
    rec = t.step()
    b = rec.batch
    V = b.extras["prefix_values"]
    assert V.shape == (b.B, b.completion_ids.shape[1] + 1) and b.adv.shape == b.mask.shape
    assert torch.allclose(b.adv.sum(-1), b.rewards - V[:, 0], atol=1e-6)
    assert t.valuer.sampled_tokens > 0 and "timing/credit_s" in rec.metrics
    assert rlnb.Trainer.tiny("grpo").valuer is None                     # GRPO pays nothing for it
