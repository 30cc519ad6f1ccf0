"""rlnb.tasks.blind: a training reward with no information (chapter 03's misconception)."""

import pytest
import torch

import rlnb


def test_the_total_reward_is_the_noise_alone_and_correct_is_still_reported():
    task = rlnb.tasks.blind("add", sigma=1.0, seed=0)
    rows = task.dataset(4, seed=0)[:]
    batch = rlnb.Batch.from_rows(rows, 2)
    right = [a for a in batch.answers]                     # every completion correct
    batch = batch.replace(completions=right[:4] + ["0"] * 4)
    out = rlnb.Rewarder.for_task(task).step(batch)
    assert out.correct.tolist() == [True] * 4 + [False] * 4
    assert torch.allclose(out.rewards, out.reward_parts["noise"].float(), atol=1e-6)
    assert out.rewards.std() > 0.1                         # not a constant: pure noise


def test_the_noise_does_not_depend_on_correctness():
    task = rlnb.tasks.blind("add", sigma=1.0, seed=3)
    funcs = task.reward_funcs()
    n = 4000
    noise = torch.tensor(funcs["noise"](["1"] * n, ["1"] * n, prompts=[str(i) for i in range(n)]))
    assert abs(float(noise.mean())) < 0.1 and abs(float(noise.std()) - 1.0) < 0.1


def test_checkpoint_spec_rebuilds_it_and_bad_sigma_is_named():
    task = rlnb.tasks.blind("add", sigma=0.5, seed=2)
    again = rlnb.tasks.from_spec(task.spec())
    assert isinstance(again, rlnb.tasks.BlindTask) and again.sigma_sample == 0.5 and again.seed == 2
    with pytest.raises(ValueError, match="sigma: expected"):
        rlnb.tasks.blind("add", sigma=-1.0)
