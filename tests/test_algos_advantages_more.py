"""REINFORCE++ (+baseline), ReMax, OPO and pass@k GRPO: hand values, naive oracles, invariants, extras."""

import itertools
import math
import statistics

import pytest
import torch

from rlnb.algos import ADVANTAGES, extra_inputs
from rlnb.algos.advantages_baselines import opo, remax
from rlnb.algos.advantages_passk import grpo_passk
from rlnb.algos.advantages_whitened import reinforce_plus_plus, reinforce_plus_plus_baseline
from rlnb.algos.resolve import needs_groups
from rlnb.recipe import Recipe

F64 = torch.float64
R = torch.tensor([0.3, 1.0, 0.0, 0.7, 0.2, 0.2, 1.0, 0.9], dtype=F64)
LEN = torch.tensor([4, 1, 7, 2, 3, 3, 5, 1])


def _token_oracle(x, lengths, eps=1e-6):
    """Whiten by expanding every completion into its tokens and using the statistics module."""
    tokens = [v for v, n in zip(x, lengths) for _ in range(n)]
    mu, sd = statistics.mean(tokens), statistics.stdev(tokens)
    return [(v - mu) / (sd + eps) for v in x]


# --- REINFORCE++ -------------------------------------------------------------------------------------

def test_reinforce_plus_plus_matches_token_expansion():
    out = reinforce_plus_plus(R, 4, LEN)
    torch.testing.assert_close(out, torch.tensor(_token_oracle(R.tolist(), LEN.tolist()), dtype=F64))


def test_reinforce_plus_plus_baseline_matches_token_expansion_of_centred_rewards():
    centred = (R.view(2, 4) - R.view(2, 4).mean(1, keepdim=True)).flatten().tolist()
    out = reinforce_plus_plus_baseline(R, 4, LEN)
    torch.testing.assert_close(out, torch.tensor(_token_oracle(centred, LEN.tolist()), dtype=F64))


@pytest.mark.parametrize("fn", [reinforce_plus_plus, reinforce_plus_plus_baseline])
def test_token_weighted_mean_zero_and_variance_one(fn):
    A = fn(R, 4, LEN, eps=0.0)
    w = LEN.to(F64)
    mean = (w * A).sum() / w.sum()
    var = (w * (A - mean) ** 2).sum() / (w.sum() - 1)
    torch.testing.assert_close(mean, torch.tensor(0.0, dtype=F64), atol=1e-12, rtol=0)
    torch.testing.assert_close(var, torch.tensor(1.0, dtype=F64))


def test_baseline_variant_sums_to_zero_per_group_only_for_equal_lengths():
    equal = reinforce_plus_plus_baseline(R, 4, torch.full((8,), 3))
    torch.testing.assert_close(equal.view(2, 4).sum(1), torch.zeros(2, dtype=F64), atol=1e-12, rtol=0)
    unequal = reinforce_plus_plus_baseline(R, 4, LEN)
    assert unequal.view(2, 4).sum(1).abs().max() > 1e-3               # long completions shift the centre


def test_baseline_variant_ignores_a_per_group_offset_but_plain_variant_does_not():
    offset = torch.tensor([5.0, -3.0], dtype=F64).repeat_interleave(4)
    torch.testing.assert_close(reinforce_plus_plus_baseline(R + offset, 4, LEN), reinforce_plus_plus_baseline(R, 4, LEN))
    assert not torch.allclose(reinforce_plus_plus(R + offset, 4, LEN), reinforce_plus_plus(R, 4, LEN))
    torch.testing.assert_close(reinforce_plus_plus(R + 9.0, 4, LEN), reinforce_plus_plus(R, 4, LEN))


def test_reinforce_plus_plus_equal_rewards_and_empty_batches_give_zero():
    assert torch.equal(reinforce_plus_plus(torch.full((6,), 0.7), 3, torch.tensor([1, 5, 2, 2, 9, 1])), torch.zeros(6))
    assert torch.equal(reinforce_plus_plus(R, 4, torch.zeros(8)), torch.zeros(8, dtype=F64))
    A = reinforce_plus_plus(R, 1, torch.ones(8))                       # no groups needed
    assert A.abs().min() > 0


# --- ReMax -------------------------------------------------------------------------------------------

def test_remax_subtracts_the_prompts_greedy_reward():
    greedy = torch.tensor([0.5, 1.0], dtype=F64)
    expected = R - greedy.repeat_interleave(4)
    torch.testing.assert_close(remax(R, 4, greedy), expected)           # (P,) form
    torch.testing.assert_close(remax(R, 4, greedy.repeat_interleave(4)), expected)  # (B,) form
    torch.testing.assert_close(remax(R, 1, R), torch.zeros(8, dtype=F64))  # greedy as good as the sample: 0
    torch.testing.assert_close(remax(R + 2, 4, greedy + 2), expected)     # a shared shift changes nothing


# --- OPO ---------------------------------------------------------------------------------------------

def test_opo_baseline_by_hand_and_length_weighted_sum_zero():
    A = opo(R, 4, LEN)
    n, r = LEN.to(F64).view(2, 4), R.view(2, 4)
    b = (n * r).sum(1) / n.sum(1)                                      # group 0: (1.2 + 1 + 0 + 1.4) / 14
    assert math.isclose(b[0].item(), 3.6 / 14, rel_tol=1e-12)
    torch.testing.assert_close(A, (r - b[:, None]).flatten())
    torch.testing.assert_close((n * A.view(2, 4)).sum(1), torch.zeros(2, dtype=F64), atol=1e-12, rtol=0)


def test_opo_with_equal_lengths_is_dr_grpo_and_equal_rewards_give_exactly_zero():
    torch.testing.assert_close(opo(R, 4, torch.full((8,), 6)), ADVANTAGES["dr_grpo"](R, 4))
    r = torch.full((4,), 0.7)                                          # fp32: the weighted mean must not drift
    assert torch.equal(opo(r, 4, torch.tensor([3, 5, 1, 2])), torch.zeros(4))
    torch.testing.assert_close(opo(R[:4], 4, torch.zeros(4)), ADVANTAGES["dr_grpo"](R[:4], 4))  # no tokens: mean


# --- pass@k GRPO -------------------------------------------------------------------------------------

def _passk_oracle(r, k):
    """mean over (k-1)-subsets T of the others of max(r_i, max T) - max T, by enumeration."""
    out = []
    for i in range(len(r)):
        others = [r[j] for j in range(len(r)) if j != i]
        terms = [max(r[i], *T) - max(T) for T in itertools.combinations(others, k - 1)]
        out.append(sum(terms) / len(terms))
    return out


@pytest.mark.parametrize("k", [2, 3, 5])
def test_passk_matches_subset_enumeration(k):
    g = torch.Generator().manual_seed(k)
    r = torch.rand(10, generator=g, dtype=F64).round(decimals=1)      # ties happen
    A = grpo_passk(r, 5, pass_k=k)
    for grp in range(2):
        rg = r[grp * 5:(grp + 1) * 5]
        expected = torch.tensor(_passk_oracle(rg.tolist(), k), dtype=F64) / (rg.std() + 1e-6)
        torch.testing.assert_close(A[grp * 5:(grp + 1) * 5], expected)
    assert torch.all(A >= 0)


def test_passk_with_k_equal_g_is_the_best_minus_the_second_best():
    r = torch.tensor([0.2, 0.9, 0.5, 0.1], dtype=F64)
    expected = torch.tensor([0.0, 0.4, 0.0, 0.0], dtype=F64) / (r.std() + 1e-6)
    torch.testing.assert_close(grpo_passk(r, 4), expected)
    torch.testing.assert_close(grpo_passk(r, 4, pass_k=4), expected)


@pytest.mark.parametrize("c, k", [(1, 2), (2, 2), (2, 3), (3, 2), (3, 4)])
def test_passk_binary_closed_form(c, k):
    G = 5
    r = torch.tensor([1.0] * c + [0.0] * (G - c), dtype=F64)
    A = grpo_passk(r, G, pass_k=k, eps=0.0)
    correct = math.comb(G - c, k - 1) / math.comb(G - 1, k - 1) / r.std().item()
    torch.testing.assert_close(A, torch.tensor([correct] * c + [0.0] * (G - c), dtype=F64))


@pytest.mark.parametrize("k", [2, 3, 4])
def test_passk_gradient_is_unbiased_for_max_at_k(k):
    """Exact check by enumeration: E over groups of (k / G) sum_i A_i grad log pi(o_i), with A before the std,
    equals grad E[max of k samples] for a 3-outcome softmax policy."""
    G, values = 4, torch.tensor([0.0, 0.3, 1.0], dtype=F64)
    theta = torch.tensor([0.2, -0.5, 0.1], dtype=F64, requires_grad=True)
    pi = theta.softmax(0)
    J = sum(torch.prod(pi[list(t)]) * values[list(t)].max() for t in itertools.product(range(3), repeat=k))
    (exact,) = torch.autograd.grad(J, theta)
    p = pi.detach()
    est = torch.zeros(3, dtype=F64)
    for seq in itertools.product(range(3), repeat=G):
        r = values[list(seq)]
        raw = grpo_passk(r, G, pass_k=k, eps=1e-300) * (r.std() + 1e-300)  # undo the std scaling
        score = sum(raw[i] * (torch.eye(3, dtype=F64)[o] - p) for i, o in enumerate(seq))
        est += torch.prod(p[list(seq)]) * (k / G) * score
    torch.testing.assert_close(est, exact)


def test_passk_bad_k_and_singletons():
    with pytest.raises(ValueError, match="pass_k"):
        grpo_passk(R, 4, pass_k=5)
    with pytest.raises(ValueError, match="pass_k"):
        grpo_passk(R, 4, pass_k=1)
    assert torch.equal(grpo_passk(R, 1, pass_k=4), torch.zeros(8, dtype=F64))
    assert torch.equal(grpo_passk(torch.full((4,), 0.5), 4), torch.zeros(4))


# --- extra inputs ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, extra", [("reinforce_plus_plus", "lengths"), ("reinforce_plus_plus_baseline", "lengths"),
                                         ("opo", "lengths"), ("remax", "greedy_rewards")])
def test_missing_or_misshapen_extra_inputs_raise_naming_them(name, extra):
    fn = ADVANTAGES[name]
    assert extra_inputs(fn) == (extra,)
    with pytest.raises(ValueError, match=f"^{extra}: .*{name}"):
        fn(R, 4)
    with pytest.raises(ValueError, match=f"^{extra}: expected shape"):
        fn(R, 4, **{extra: torch.ones(3)})


@pytest.mark.parametrize("name, fn", [("lengths", reinforce_plus_plus), ("lengths", opo)])
def test_negative_lengths_are_rejected(name, fn):
    with pytest.raises(ValueError, match="^lengths"):
        fn(R, 4, -LEN)


@pytest.mark.parametrize("name, grouped", [("reinforce_plus_plus", False), ("remax", False),
                                           ("reinforce_plus_plus_baseline", True), ("opo", True), ("grpo_passk", True)])
def test_needs_groups_probes_entries_with_extra_inputs(name, grouped):
    assert needs_groups(ADVANTAGES[name]) is grouped
    if grouped:
        with pytest.raises(ValueError, match="num_generations"):
            Recipe(advantage=name, num_generations=1)
    else:
        assert Recipe(advantage=name, num_generations=1).advantage == name


def test_a_recipe_with_pass_k_above_its_group_size_is_refused_when_made():
    assert Recipe(advantage="grpo_passk", num_generations=4, pass_k=4).hyperparameters()["advantage"]["pass_k"] == 4
    with pytest.raises(ValueError, match=r"^pass_k: .*\[2, G=4\]"):
        Recipe(advantage="grpo_passk", num_generations=4, pass_k=5)
    with pytest.raises(ValueError, match=r"^pass_k: expected a number >= 2, got 1"):
        Recipe(advantage="grpo_passk", pass_k=1)
