"""Advantage estimators against hand-computed values, naive-loop oracles and invariants."""

import math
import statistics

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlnb.algos import ADVANTAGES, extra_inputs, gae
from rlnb.algos.advantages import batch_norm, grpo, maxrl, rloo

R = torch.tensor([1.0, 0.0, 0.0, 0.0])

# plausible values for the (B,) extra inputs some entries take: completion lengths, greedy rewards
EXTRAS = {"lengths": lambda r: 1 + torch.arange(len(r)) % 3, "greedy_rewards": lambda r: r.float().mean().expand(len(r)),
          # GDPO's reward parts and weights; the optimal token baseline's (B, T) inputs (T = 3, ragged lengths)
          "reward_parts": lambda r: {"correct": r.float(), "format": (r.float() > 0.5).float()},
          "reward_weights": lambda r: torch.tensor([1.0, 0.5]),
          "mask": lambda r: (torch.arange(3) < (1 + torch.arange(len(r)) % 3)[:, None]).float(),
          "old_logp": lambda r: torch.full((len(r), 3), 0.5).log(),
          "sum_pi_squared": lambda r: torch.full((len(r), 3), 0.5),
          # VinePPO's prefix values in their (B,) form, V(prompt) alone (its (B, T + 1) form: test_algos_credit.py)
          "prefix_values": lambda r: r.float().mean().expand(len(r)),
          # the rollout correction's IS weights on the token baselines' path weights (B, T)
          "rollout_is_weights": lambda r: torch.full((len(r), 3), 1.5)}


def _call(name, rewards, G):
    fn = ADVANTAGES[name]
    return fn(rewards, G, **{k: EXTRAS[k](rewards) for k in extra_inputs(fn)})


@pytest.mark.parametrize("name, expected", [
    ("reinforce", [1.0, 0.0, 0.0, 0.0]),
    ("reinforce_baseline", [0.75, -0.25, -0.25, -0.25]),
    ("grpo", [1.5, -0.5, -0.5, -0.5]),                 # unbiased std = sqrt(0.25) = 0.5
    ("dr_grpo", [0.75, -0.25, -0.25, -0.25]),
    ("rloo", [1.0, -1 / 3, -1 / 3, -1 / 3]),
    ("maxrl", [3.0, -1.0, -1.0, -1.0]),
])
def test_worked_example(name, expected):
    torch.testing.assert_close(ADVANTAGES[name](R, 4), torch.tensor(expected), atol=1e-4, rtol=0)  # eps 1e-6


def test_grpo_biased_std_by_hand():
    # population std of [1,0,0,0] = sqrt(3/16) = 0.4330
    s = math.sqrt(3 / 16)
    torch.testing.assert_close(grpo(R, 4, unbiased=False, eps=0.0), torch.tensor([0.75, -0.25, -0.25, -0.25]) / s)


def test_grpo_matches_statistics_module():
    r = torch.tensor([0.3, 1.7, -2.0, 0.9, 5.0, 5.5, 4.0, 4.25], dtype=torch.float64)
    expected = []
    for g in (r[:4].tolist(), r[4:].tolist()):
        mu, sd = statistics.mean(g), statistics.stdev(g)
        expected += [(x - mu) / (sd + 1e-4) for x in g]
    torch.testing.assert_close(grpo(r, 4, eps=1e-4), torch.tensor(expected, dtype=torch.float64))


def test_rloo_is_leave_one_out_baseline():
    r = torch.tensor([0.2, 1.0, 3.0, -1.0, 0.5, 0.5])
    G, expected = 3, []
    for i in range(6):
        others = [r[j].item() for j in range(6) if j // G == i // G and j != i]
        expected.append(r[i].item() - sum(others) / len(others))
    torch.testing.assert_close(rloo(r, G), torch.tensor(expected))


def test_maxrl_binary_rewards_and_all_fail_group():
    # success rate p = 0.5 in the first group: success -> (1-p)/p = 1, failure -> -1; second group all fail
    r = torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    torch.testing.assert_close(maxrl(r, 4), torch.tensor([1.0, 1.0, -1.0, -1.0, 0, 0, 0, 0]), atol=1e-5, rtol=0)


def test_maxrl_rejects_negative_rewards():
    with pytest.raises(ValueError, match="rewards"):
        maxrl(torch.tensor([1.0, -1.0]), 2)


def test_batch_norm_rewards_std_vs_centred_std():
    r = torch.tensor([1.0, 0.0, 1.0, 1.0])
    centred = torch.tensor([0.5, -0.5, 0.0, 0.0])
    # std of raw rewards [1,0,1,1] (population) = sqrt(3/16); of centred [.5,-.5,0,0] = sqrt(1/8)
    torch.testing.assert_close(batch_norm(r, 2, unbiased=False, eps=0.0), centred / math.sqrt(3 / 16))
    torch.testing.assert_close(batch_norm(r, 2, unbiased=False, eps=0.0, batch_std_centred=True),
                               centred / math.sqrt(1 / 8))


GROUP_CENTRED = ["reinforce_baseline", "grpo", "dr_grpo", "rloo", "maxrl", "batch_norm"]


@pytest.mark.parametrize("name", GROUP_CENTRED)
def test_group_centred_advantages_sum_to_zero_per_group(name):
    r = torch.tensor([0.0, 1.0, 1.0, 0.0, 0.25, 0.0, 1.0, 1.0, 1.0], dtype=torch.float64)
    adv = ADVANTAGES[name](r, 3).view(3, 3)
    torch.testing.assert_close(adv.sum(1), torch.zeros(3, dtype=torch.float64), atol=1e-9, rtol=0)


@pytest.mark.parametrize("name", ["grpo", "rloo", "dr_grpo", "reinforce_baseline", "batch_norm"])
def test_shifting_rewards_changes_nothing(name):
    r = torch.tensor([0.1, 0.9, 0.4, 2.0, -1.0, 0.3], dtype=torch.float64)
    torch.testing.assert_close(ADVANTAGES[name](r + 7.5, 3), ADVANTAGES[name](r, 3))


@pytest.mark.parametrize("value", [0.1, 0.7, 1.3, -2.05])
def test_grpo_equal_fp32_rewards_get_exactly_zero(value):
    # 8 copies of 0.7 in fp32: their fp32 mean is off by an ulp and the fp32 std is ~6e-8, so without fp64
    # statistics (r - mean) / (std + 1e-6) came out near 0.056 for every row instead of 0.
    r = torch.full((16,), value, dtype=torch.float32)
    adv = ADVANTAGES["grpo"](r, 8)
    assert adv.dtype == torch.float32 and torch.equal(adv, torch.zeros(16))


def test_grpo_shared_offset_changes_nothing_in_fp32():
    gen = torch.Generator().manual_seed(0)
    r = (torch.rand(64, generator=gen) < 0.3).float()                  # binary rewards, many equal groups
    offset = torch.randn(8, generator=gen).repeat_interleave(8)      # one draw per group of 8
    torch.testing.assert_close(ADVANTAGES["grpo"](r + offset, 8), ADVANTAGES["grpo"](r, 8), atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", ["grpo", "batch_norm"])
def test_scaling_rewards_changes_nothing_for_std_normalised(name):
    r = torch.tensor([0.1, 0.9, 0.4, 2.0, -1.0, 0.3], dtype=torch.float64)
    torch.testing.assert_close(ADVANTAGES[name](r * 13.0, 3, eps=0.0), ADVANTAGES[name](r, 3, eps=0.0))


def test_scaling_does_change_dr_grpo():
    assert torch.allclose(ADVANTAGES["dr_grpo"](R * 2, 4), 2 * ADVANTAGES["dr_grpo"](R, 4))


@pytest.mark.parametrize("name", GROUP_CENTRED)
def test_singleton_groups_get_zero(name):
    r = torch.tensor([1.0, 0.0, 3.0])
    assert torch.equal(ADVANTAGES[name](r, 1), torch.zeros(3))


def test_reinforce_singleton_is_raw_reward():
    assert torch.equal(ADVANTAGES["reinforce"](torch.tensor([1.0, 0.0, 3.0]), 1), torch.tensor([1.0, 0.0, 3.0]))


def test_every_extra_input_has_a_test_value():
    assert {k for fn in ADVANTAGES.values() for k in extra_inputs(fn)} == set(EXTRAS)


@pytest.mark.parametrize("name", sorted(ADVANTAGES))
def test_bad_shape_names_rewards(name):
    with pytest.raises(ValueError, match="rewards"):
        ADVANTAGES[name](torch.ones(5), 2)
    with pytest.raises(ValueError, match="group_size"):
        ADVANTAGES[name](torch.ones(4), 0)


@pytest.mark.parametrize("name", sorted(ADVANTAGES))
def test_integer_and_bool_rewards_promote_to_float(name):
    adv = _call(name, torch.tensor([1, 0, 1, 1]), 2)
    assert adv.dtype == torch.float32


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 100, allow_nan=False, width=32), min_size=8, max_size=8),
       st.sampled_from([1, 2, 4, 8]), st.sampled_from(sorted(ADVANTAGES)))
def test_finite_outputs_for_finite_inputs(rewards, G, name):
    adv = _call(name, torch.tensor(rewards), G)
    assert adv.shape in ((8,), (8, 3)) and torch.isfinite(adv).all()   # (B, T): the optimal token baselines


# --- GAE ------------------------------------------------------------------------------------------

def _gae_oracle(r, v, n, gamma, lam):
    """Naive double loop over one sequence of n valid tokens: A_t = sum_k (gamma lam)^k delta_{t+k}."""
    vv = v[:n] + [0.0]
    delta = [r[t] + gamma * vv[t + 1] - vv[t] for t in range(n)]
    return [sum((gamma * lam) ** (k - t) * delta[k] for k in range(t, n)) for t in range(n)]


@pytest.mark.parametrize("gamma, lam", [(1.0, 1.0), (0.9, 0.95), (0.5, 0.0)])
def test_gae_matches_naive_loop(gamma, lam):
    g = torch.Generator().manual_seed(0)
    r, v = torch.randn(3, 6, generator=g, dtype=torch.float64), torch.randn(3, 6, generator=g, dtype=torch.float64)
    lengths = [6, 3, 1]
    mask = torch.tensor([[1.0] * n + [0.0] * (6 - n) for n in lengths], dtype=torch.float64)
    adv, ret = gae(r, v, mask, gamma=gamma, lam=lam, whiten_advantages=False)
    for i, n in enumerate(lengths):
        expected = _gae_oracle(r[i].tolist(), v[i].tolist(), n, gamma, lam)
        torch.testing.assert_close(adv[i, :n], torch.tensor(expected, dtype=torch.float64))
        torch.testing.assert_close(ret[i, :n], adv[i, :n] + v[i, :n])
        assert torch.all(adv[i, n:] == 0) and torch.all(ret[i, n:] == 0)


def test_gae_gamma_lam_one_is_return_minus_value():
    r = torch.tensor([[0.0, 0.0, 1.0]])
    v = torch.tensor([[0.2, 0.4, 0.6]])
    adv, ret = gae(r, v, torch.ones(1, 3), whiten_advantages=False)
    torch.testing.assert_close(adv, torch.tensor([[0.8, 0.6, 0.4]]))
    torch.testing.assert_close(ret, torch.ones(1, 3))


def test_gae_whitening_over_valid_tokens():
    g = torch.Generator().manual_seed(1)
    r, v = torch.randn(4, 5, generator=g), torch.randn(4, 5, generator=g)
    mask = torch.ones(4, 5)
    mask[1, 3:] = 0
    adv, _ = gae(r, v, mask)
    valid = adv[mask.bool()]
    assert abs(valid.mean().item()) < 1e-5 and abs(valid.std().item() - 1) < 1e-4
    assert torch.all(adv[~mask.bool()] == 0)


def test_gae_bad_shapes():
    with pytest.raises(ValueError, match="values"):
        gae(torch.zeros(2, 3), torch.zeros(2, 4), torch.ones(2, 3))


@pytest.mark.parametrize("name", ["grpo", "maxrl", "batch_norm"])
def test_eps_zero_on_a_group_without_spread_gives_zero_not_nan(name):
    """The registry's normalised estimators at eps = 0: an all-equal (or all-fail) group has A = 0, as with eps > 0."""
    from rlnb.algos import ADVANTAGES

    r = torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0])
    A = ADVANTAGES[name](r, 4, eps=0.0)
    assert torch.isfinite(A).all() and A[:4].eq(0).all()
    assert torch.allclose(A[4:], ADVANTAGES[name](r, 4)[4:], atol=1e-4)   # the group with spread: eps barely matters
