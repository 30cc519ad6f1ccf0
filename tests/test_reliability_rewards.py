"""Reward functions that misbehave, under both policies; and same-seed determinism of stateful recipes."""

import math

import pytest
import torch

import rlnb
from rlnb import Batch
from rlnb.stages import Rewarder, RewardFunctionError

COMPLETIONS = ["12", "oops", "", "7"]


def batch():
    b = Batch.from_rows({"prompt": ["a", "b"], "answer": ["12", "7"]}, 2)
    ids = torch.ones(4, 2, dtype=torch.long)
    return b.replace(completion_ids=ids, mask=torch.ones(4, 2), completions=COMPLETIONS)


def fragile(completions, answer, **kw):
    """Crashes on the whole batch whenever "oops" is in it, like a parser that chokes on one input."""
    if "oops" in completions:
        raise ValueError("cannot parse")
    return [float(c == a) for c, a in zip(completions, answer)]


def test_a_function_that_raises_on_the_batch_is_blamed_on_the_right_completion():
    with pytest.raises(RewardFunctionError, match=r"'fragile' raised ValueError: cannot parse for completion 1 \('oops'\)"):
        Rewarder({"fragile": fragile}).step(batch())


def test_zero_policy_scores_only_the_failing_entries_zero_and_counts_them():
    r = Rewarder({"fragile": fragile, "length": lambda cs, a, **kw: [torch.tensor(len(c) / 2) for c in cs]},
                 on_error="zero")
    out = r.step(batch())
    assert out.reward_parts["fragile"].tolist() == [1.0, 0.0, 0.0, 1.0]   # row 1 failed; rows 0 and 3 correct
    assert out.reward_parts["length"].tolist() == [1.0, 2.0, 0.0, 0.5]    # 0-d tensors are numbers too
    assert out.rewards.tolist() == [2.0, 2.0, 0.0, 1.5]
    assert r.errors == 1 and out.extras["reward_errors"].tolist() == [0.0, 1.0, 0.0, 0.0]


@pytest.mark.parametrize("bad", [None, math.nan, math.inf, "1", [1.0], 1 + 2j, 1e39])
def test_zero_policy_on_bad_values(bad):
    r = Rewarder({"f": lambda cs, a, **kw: [1.0, bad, 1.0, 1.0]}, on_error="zero")
    out = r.step(batch())
    assert out.rewards.tolist() == [1.0, 0.0, 1.0, 1.0] and r.errors == 1


def test_numpy_scalars_are_rewards_and_an_fp32_overflow_is_named():
    np = pytest.importorskip("numpy")
    r = Rewarder({"f": lambda cs, a, **kw: [np.bool_(c == x) for c, x in zip(cs, a)]})
    assert r.step(batch()).rewards.tolist() == [1.0, 0.0, 0.0, 1.0]      # numpy.bool_ counts as 0/1
    r = Rewarder({"f": lambda cs, a, **kw: [np.float32(0.5), 1e39, 0.0, 0.0]})
    with pytest.raises(RewardFunctionError, match=r"'f' returned 1e\+39 for completion 1 .*fp32's range"):
        r.step(batch())


def test_zero_policy_when_the_whole_result_is_unusable():
    r = Rewarder({"f": lambda cs, a, **kw: None}, on_error="zero")
    out = r.step(batch())
    assert out.rewards.tolist() == [0.0] * 4 and r.errors == 4


def test_trainer_counts_reward_errors_per_step():
    t = rlnb.Trainer.tiny("grpo", task="add", seed=0, prompts_per_step=2, num_generations=2, max_new_tokens=8,
                          reward_on_error="zero")  # a Trainer argument, saved with checkpoints
    t.rewarder.funcs["format"] = lambda cs, a, **kw: [None] * len(cs)
    rec = t.step()
    assert rec.metrics["reward_errors"] == 4 and t.rewarder.errors == 4


@pytest.mark.parametrize("recipe", ["dapo", "scalerl"])
def test_same_seed_same_history_for_stateful_recipes(recipe):
    """Dynamic sampling rounds, filters, pass-rate retirement, fp32 head: all drawn from seeded streams."""
    runs = []
    for _ in range(2):
        t = rlnb.Trainer.tiny(recipe, task="countdown", seed=4, prompts_per_step=4, num_generations=4,
                              max_new_tokens=12)
        t.run(2, progress=False)
        runs.append([{k: v for k, v in h.items() if not k.startswith("timing/")} for h in t.history])
    assert runs[0] == runs[1]
