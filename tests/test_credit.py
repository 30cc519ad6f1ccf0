"""rlnb.credit: Monte-Carlo prefix values against exact values on a model whose probabilities we wrote."""

from types import SimpleNamespace

import pytest
import torch

from rlnb import Batch
from rlnb.credit import mc_token_advantages, prefix_values
from rlnb.tasks import Reward

PAD, EOS, A, B_ = 0, 1, 2, 3
CHARS = {A: "a", B_: "b"}
# next-token probabilities given the last token (a Markov chain): rows = last token, columns = PAD, EOS, a, b
P = torch.tensor([[0.0, 0.2, 0.4, 0.4],
                  [0.0, 0.2, 0.4, 0.4],
                  [0.0, 0.2, 0.3, 0.5],     # after 'a'
                  [0.0, 0.4, 0.4, 0.2]])    # after 'b'


class MarkovLM(torch.nn.Module):
    """The next token depends on the last one only, with probabilities P: exact values are computable."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(4, 1)
        self.register_buffer("table", P.log())

    def get_input_embeddings(self):
        return self.emb

    def forward(self, input_ids, attention_mask=None, position_ids=None, use_cache=True, logits_to_keep=0,
                past_key_values=None):
        logits = self.table[input_ids]                                   # (B, T, V)
        if logits_to_keep:
            logits = logits[:, -logits_to_keep:]
        return SimpleNamespace(logits=logits, past_key_values=((input_ids[:, -1:].float(),),))


class CharTokenizer:
    pad_token_id, eos_token_id = PAD, EOS

    def batch_decode(self, seqs, skip_special_tokens=True):
        return ["".join(CHARS.get(int(t), "") for t in s) for s in seqs]


class HasAB:
    """Reward 1 when the completion contains 'ab' (so a 'b' right after an 'a' decides the outcome)."""

    def reward(self, completion, answer):
        return Reward(float("ab" in completion))


def exact_value(text: str, last: int, budget: int) -> float:
    """E[reward] of continuing ``text`` (whose last token is ``last``) for at most ``budget`` tokens."""
    if budget == 0 or "ab" in text:  # 'ab' once written stays written
        return float("ab" in text)
    v = P[last, EOS].item() * float("ab" in text)
    for tok in (A, B_):
        v += P[last, tok].item() * exact_value(text + CHARS[tok], tok, budget - 1)
    return v


def make_batch():
    """Prompt 'a'; completions 'bab<eos>', 'aa<eos>', 'bbbb' (truncated), width T = 4."""
    comp = torch.tensor([[B_, A, B_, EOS], [A, A, EOS, PAD], [B_, B_, B_, B_]])
    mask = (torch.arange(4) < torch.tensor([[4], [3], [4]])).float()
    batch = Batch.from_rows({"prompt": ["a"], "answer": ["-"]}, 3)
    return batch.replace(prompt_ids=torch.full((3, 1), A), prompt_mask=torch.ones(3, 1, dtype=torch.long),
                         completion_ids=comp, mask=mask, truncated=torch.tensor([False, False, True]),
                         completions=["bab", "aa", "bbbb"])


def exact_table(batch, M):
    out = torch.zeros(batch.B, batch.completion_ids.shape[1] + 1)
    for r in range(batch.B):
        toks = batch.completion_ids[r, : int(batch.lengths[r])].tolist()
        text = "".join(CHARS.get(t, "") for t in toks)
        for t in range(out.shape[1]):
            if t >= len(toks):
                out[r, t] = float("ab" in text)
            else:
                out[r, t] = exact_value(text[:t], A if t == 0 else toks[t - 1], M - t)
    return out


def estimate(K, seed=0, **kw):
    return prefix_values(MarkovLM(), CharTokenizer(), make_batch(), HasAB(), K=K,
                         generator=torch.Generator().manual_seed(seed), **kw)


def test_exact_values_by_hand():
    # the recursion itself, against two values worked out on paper
    assert exact_value("a", A, 1) == pytest.approx(0.5)                  # one token left: 'b' with 0.5
    # 'b' then two tokens: 'a' (0.4) then 'b' (0.5) -> 0.2; 'b' then 'ab' impossible in 1 token
    assert exact_value("b", B_, 2) == pytest.approx(0.4 * 0.5)


@pytest.mark.parametrize("K", [40, 4000])
def test_estimates_match_exact_values_within_sampling_error(K):
    exact = exact_table(make_batch(), 4)
    est = estimate(K)
    sigma = (exact * (1 - exact) / K).sqrt()                            # binomial standard error
    assert (est - exact).abs().le(4.5 * sigma + 1e-6).all(), (est, exact)
    # where the outcome is already decided the estimate is exact, not just close
    decided = (exact == 0) | (exact == 1)
    assert torch.equal(est[decided], exact[decided])


def test_error_shrinks_with_K():
    exact = exact_table(make_batch(), 4)
    rms = [((estimate(K, seed=s) - exact) ** 2).mean().sqrt() for K in (16, 4096) for s in (1,)]
    assert rms[1] < rms[0] / 4, rms                                   # 1 / sqrt(256) = 1/16 expected


def test_longer_budget_changes_values_as_exact_values_do():
    exact = exact_table(make_batch(), 7)
    est = estimate(4000, max_new_tokens=7)
    assert (est - exact).abs().max() < 0.04
    assert not torch.allclose(exact, exact_table(make_batch(), 4))      # the budget matters here


def test_telescoping_sum_is_reward_minus_prompt_value():
    batch = make_batch()
    values = estimate(8)
    adv = mc_token_advantages(values, batch.mask)
    reward = torch.tensor([1.0, 0.0, 0.0])                              # 'bab' has 'ab'; the others do not
    assert torch.allclose(adv.sum(-1), reward - values[:, 0], atol=1e-6)
    assert torch.equal(values[:, -1], reward)
    assert (adv[batch.mask == 0] == 0).all()


def test_mc_token_advantages_by_hand():
    values = torch.tensor([[0.5, 0.25, 1.0, 1.0], [0.5, 0.75, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    assert torch.equal(mc_token_advantages(values, mask), torch.tensor([[-0.25, 0.75, 0.0], [0.25, -0.75, 0.0]]))


def test_deterministic_under_generator_and_rows_subset():
    a, b, c = estimate(32, seed=3), estimate(32, seed=3), estimate(32, seed=4)
    assert torch.equal(a, b) and not torch.equal(a, c)
    sub = estimate(32, seed=3, rows=[2, 0])
    assert sub.shape == (2, 5)
    assert torch.equal(sub[:, -1], torch.tensor([0.0, 1.0]))


def test_stats_count_the_continuations():
    stats = {}
    estimate(5, stats=stats)
    assert stats["sequences"] == 5 * (4 + 3 + 4)                        # K continuations of every prefix
    assert 0 < stats["sampled_tokens"] <= stats["sequences"] * 4
    assert 4 <= stats["forwards"] <= 4 + 3 + 2 + 1


def test_bad_inputs_name_the_argument():
    model, tok, batch = MarkovLM(), CharTokenizer(), make_batch()
    with pytest.raises(ValueError, match="K: expected a positive int"):
        prefix_values(model, tok, batch, HasAB(), K=0)
    with pytest.raises(ValueError, match="rows: expected indices in 0..2"):
        prefix_values(model, tok, batch, HasAB(), rows=[5])
    with pytest.raises(ValueError, match="batch: expected a sampled Batch"):
        prefix_values(model, tok, Batch.from_rows({"prompt": ["a"], "answer": ["-"]}, 2), HasAB())
    with pytest.raises(ValueError, match="max_new_tokens: expected at least"):
        prefix_values(model, tok, batch, HasAB(), max_new_tokens=2)
    with pytest.raises(TypeError, match="task: expected"):
        prefix_values(model, tok, batch, object())
    with pytest.raises(ValueError, match="mask: expected shape"):
        mc_token_advantages(torch.zeros(2, 4), torch.zeros(2, 4))


def test_on_the_default_model_the_last_column_is_the_reward():
    import rlnb

    model, tok = rlnb.load_default()
    task = rlnb.tasks.get("add")
    batch = Batch.from_rows(task.dataset(2, seed=0)[:], 2)
    batch = rlnb.Sampler(model, tok, max_new_tokens=24, generator=torch.Generator().manual_seed(0)).step(batch)
    values = prefix_values(model, tok, batch, "add", K=2, rows=[0, 3], max_new_tokens=24,
                           generator=torch.Generator().manual_seed(0))
    rewards = torch.tensor([task.reward(batch.completions[r], batch.answers[r]).reward for r in (0, 3)])
    assert values.shape == (2, batch.completion_ids.shape[1] + 1)
    assert torch.equal(values[:, -1], rewards)
    assert ((values >= 0) & (values <= 1)).all()
    assert set((values * 2).flatten().tolist()) <= {0.0, 1.0, 2.0}      # means of K = 2 rewards in {0, 1}
