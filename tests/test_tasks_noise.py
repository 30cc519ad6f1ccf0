"""rlnb.tasks.noisy: reward noise shared by a group or drawn per completion, with clean verifier parts."""

import statistics

import pytest
import torch

from rlnb import Batch, Rewarder, tasks
from rlnb.algos import ADVANTAGES

PROMPTS = ["1+2=", "1+2=", "1+2=", "4+4=", "4+4=", "4+4="]
ANSWERS = ["3", "3", "3", "8", "8", "8"]
COMPLETIONS = ["3", "4", "3", "8", "8", "9"]


def test_shared_noise_is_one_draw_per_prompt():
    t = tasks.noisy("add", sigma_shared=0.5, seed=1)
    v = t.noise(COMPLETIONS, ANSWERS, prompts=PROMPTS)
    assert v[0] == v[1] == v[2] and v[3] == v[4] == v[5] and v[0] != v[3]
    again = t.noise(COMPLETIONS, ANSWERS, prompts=PROMPTS)               # the stream advances: fresh noise
    assert again[0] != v[0]
    assert tasks.noisy("add", sigma_shared=0.5, seed=1).noise(COMPLETIONS, ANSWERS, prompts=PROMPTS) == v


def test_sample_noise_differs_within_a_group_and_has_its_sigma():
    t = tasks.noisy("add", sigma_sample=2.0, seed=0)
    v = t.noise(["x"] * 4000, ["1"] * 4000, prompts=["p"] * 4000)
    assert len(set(v[:3])) == 3
    assert abs(statistics.pstdev(v) - 2.0) < 0.1 and abs(statistics.fmean(v)) < 0.1  # 3 s.e. = 0.095


def test_zero_sigmas_give_zero_noise_and_clean_parts():
    t = tasks.noisy("add")
    assert t.noise(COMPLETIONS, ANSWERS, prompts=PROMPTS) == [0.0] * 6
    assert t.reward("3", "3").parts == tasks.get("add").reward("3", "3").parts
    assert t.dataset(5, seed=3)["prompt"] == tasks.get("add").dataset(5, seed=3)["prompt"]


def test_rewarder_adds_the_noise_part_and_shared_noise_leaves_grpo_unchanged():
    t = tasks.noisy("add", sigma_shared=0.7, seed=0)
    batch = Batch.from_rows({"prompt": ["1+2=", "4+4="], "answer": ["3", "8"]}, 3).replace(completions=COMPLETIONS)
    out = Rewarder.for_task(t).step(batch)
    correct = torch.tensor([1.0, 0.0, 1.0, 1.0, 1.0, 0.0])
    assert torch.equal(out.reward_parts["correct"], correct)
    torch.testing.assert_close(out.rewards, correct + out.reward_parts["noise"])
    assert out.reward_parts["noise"].std() > 0.1
    torch.testing.assert_close(ADVANTAGES["grpo"](out.rewards, 3), ADVANTAGES["grpo"](correct, 3), atol=1e-5, rtol=0)


@pytest.mark.parametrize("bad, error", [(-0.1, ValueError), (float("nan"), ValueError), (float("inf"), ValueError),
                                        ("1", TypeError), (True, TypeError)])
def test_bad_sigma_names_the_argument(bad, error):
    with pytest.raises(error, match="^sigma_sample: expected"):
        tasks.noisy("add", sigma_sample=bad)
