"""rlnb.stages.credit.branch_credit and continuation_values: uniform credit's mean against Monte Carlo's, exactly.

The statement tested (issue 44): averaged over the completions that chose x at prefix s, uniform credit
(r minus the prompt's baseline) is V(s,x) - V(s0), Monte Carlo's credit V(s,x) - V(s) plus V(s) - V(s0), a term
that does not depend on x. The old text said the two were equal; the counterexample below refutes that.
"""

import itertools

import pytest
import torch

from rlnb.stages.credit import branch_credit, continuation_values
from tests.test_credit import B_, EOS, PAD, A, CharTokenizer, HasAB, MarkovLM, P, exact_value

Y, S1, a, b = 10, 11, 12, 13


def counterexample():
    """From s0: 'y' (p 1/2, reward 1), or s1 (p 1/2) then 'a' (reward 1) or 'b' (reward 0), equally likely."""
    ids = torch.tensor([[Y, PAD], [S1, a], [S1, b]])
    return ids, torch.tensor([1.0, 1.0, 0.0]), torch.tensor([0.5, 0.25, 0.25])


def test_counterexample_from_the_issue_by_hand():
    ids, r, w = counterexample()
    out = branch_credit(ids, r, [S1], weights=w)
    assert out["V(s0)"] == 0.75 and out["V(s)"] == 0.5
    tok = out["tokens"]
    assert (tok[a]["uniform"], tok[b]["uniform"]) == (0.25, -0.75)      # r - V(s0) for the rows through s1
    assert (tok[a]["mc"], tok[b]["mc"]) == (0.5, -0.5)                  # V(s, x) - V(s)
    assert tok[a]["share"] == tok[b]["share"] == 0.5
    # the old statement (uniform's mean = Monte Carlo's credit) is false here ...
    assert tok[a]["uniform"] != tok[a]["mc"]
    # ... the corrected one holds: they differ by V(s) - V(s0) = -0.25, the same for both tokens
    assert {x["uniform"] - x["mc"] for x in tok.values()} == {out["V(s)"] - out["V(s0)"]} == {-0.25}


def test_at_the_prompt_the_two_agree():
    ids, r, w = counterexample()
    out = branch_credit(ids, r, [], weights=w)                          # s = s0: V(s) - V(s0) = 0
    assert out["tokens"][Y]["uniform"] == out["tokens"][Y]["mc"] == 0.25
    assert out["tokens"][S1]["uniform"] == out["tokens"][S1]["mc"] == -0.25


def enumerate_markov(M):
    """Every completion of the Markov model of test_credit (prompt 'a') up to M tokens, with its probability."""
    rows, probs = [], []
    for n in range(1, M + 1):
        for toks in itertools.product((EOS, A, B_), repeat=n):
            if EOS in toks[:-1] or (n < M and toks[-1] != EOS):
                continue                                                 # EOS ends it; no EOS only at the budget
            p, last = 1.0, A
            for t in toks:
                p, last = p * P.double()[last, t].item(), t
            rows.append(list(toks) + [PAD] * (M - n))
            probs.append(p)
    return torch.tensor(rows), torch.tensor(probs, dtype=torch.float64)


def test_exact_enumeration_difference_is_independent_of_the_token_at_every_prefix():
    M = 5
    ids, w = enumerate_markov(M)
    assert abs(float(w.sum()) - 1) < 1e-6                             # P is float32
    text = CharTokenizer().batch_decode(ids.tolist())
    r = torch.tensor([float("ab" in "a" + s) for s in text])            # the prompt 'a' counts: HasAB on prompt + completion
    gaps_seen = set()
    for t in range(M - 1):
        for prefix in {tuple(row[:t]) for row in ids.tolist() if EOS not in row[:t] and PAD not in row[:t]}:
            out = branch_credit(ids, r, list(prefix), weights=w)
            diffs = [x["uniform"] - x["mc"] for x in out["tokens"].values()]
            assert max(diffs) - min(diffs) < 1e-12                        # one offset for every token at s
            assert diffs[0] == pytest.approx(out["V(s)"] - out["V(s0)"], abs=1e-12)
            gaps_seen.add(round(diffs[0], 6))
    assert len(gaps_seen) > 3                                            # the offset does vary with s: not a trivial 0


def test_rloo_baselines_give_the_same_mean_in_expectation():
    ids, r, w = counterexample()
    out = branch_credit(ids, r, [S1], weights=w, baselines=torch.tensor([0.5, 0.5, 0.5]))
    assert out["tokens"][a]["uniform"] == 0.5 and out["tokens"][b]["uniform"] == -0.5  # r - b row by row


def test_continuation_values_match_exact_values():
    K = 4000
    pre = [torch.tensor([], dtype=torch.long), torch.tensor([B_]), torch.tensor([B_, A])]
    est = continuation_values(MarkovLM(), CharTokenizer(), HasAB(), torch.tensor([A]), pre, "-", K=K,
                              max_new_tokens=4, generator=torch.Generator().manual_seed(0))
    # HasAB scores the completion text only (the prompt 'a' is not part of it)
    exact = torch.tensor([exact_value("", A, 4), exact_value("b", B_, 3), exact_value("ba", A, 2)])
    sigma = (exact * (1 - exact) / K).sqrt()
    assert est.shape == (3,)
    assert ((est - exact).abs() <= 4.5 * sigma + 1e-6).all(), (est, exact)


def test_bad_inputs_are_named():
    ids, r, w = counterexample()
    with pytest.raises(ValueError, match="ids"):
        branch_credit(ids[0], r, [S1])
    with pytest.raises(ValueError, match="weights"):
        branch_credit(ids, r, [S1], weights=w[:2])
    with pytest.raises(ValueError, match="prefix"):
        branch_credit(ids, r, [a])
    with pytest.raises(ValueError, match="K"):
        continuation_values(MarkovLM(), CharTokenizer(), HasAB(), torch.tensor([A]), [torch.tensor([B_])], "-", K=0)
    with pytest.raises(ValueError, match="prefixes"):
        continuation_values(MarkovLM(), CharTokenizer(), HasAB(), torch.tensor([A]), [torch.tensor([B_] * 4)], "-",
                            K=2, max_new_tokens=4)
