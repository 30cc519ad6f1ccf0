"""A reward function that hangs: with a time limit the step fails (or scores 0) within the limit, naming the
function; without one nothing changes (the default is no limit)."""

import threading
import time

import pytest

from rlnb import Trainer
from rlnb.cli import build_parser
from rlnb.stages import Rewarder
from rlnb.stages.reward import RewardTimeout


@pytest.fixture
def hang():
    release = threading.Event()

    def verifier(completions, answers, **kw):  # never answers until the test ends
        release.wait(60)
        return [0.0] * len(completions)

    yield verifier
    release.set()


def small(**kw):
    return Trainer.tiny("grpo", prompts_per_step=2, num_generations=4, max_new_tokens=8, **kw)


def test_a_hanging_reward_function_fails_the_step_within_the_limit_and_changes_nothing(hang):
    t = small(reward_time_limit=0.5)
    t.rewarder.funcs["correct"] = hang
    t0 = time.monotonic()
    with pytest.raises(RewardTimeout, match=r"^reward function 'correct': no result within reward_time_limit=0.5 s"):
        t.step()
    assert time.monotonic() - t0 < 20 and t.step_count == 0 and t.history == []


def test_with_reward_on_error_zero_an_overrun_scores_the_call_0_and_counts_it(hang):
    r = Rewarder({"slow": hang, "fast": lambda c, a, **k: [1.0] * len(c)}, on_error="zero", time_limit=0.3)
    batch = small().rollout()
    out = r.step(batch.replace(rewards=None))
    assert out.reward_parts["slow"].eq(0).all() and out.reward_parts["fast"].eq(1).all()
    assert r.errors == batch.B and out.extras["reward_errors"].eq(1).all()


def test_a_quick_function_under_a_limit_gives_the_same_rewards_as_without():
    a, b = small(), small(reward_time_limit=30)
    ra, rb = a.step().batch.rewards, b.step().batch.rewards
    assert ra.equal(rb)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "5", True])
def test_a_bad_time_limit_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="^reward_time_limit: expected None"):
        small(reward_time_limit=bad)
    with pytest.raises(ValueError, match="^time_limit: expected None"):
        Rewarder({"x": len}, time_limit=bad)


def test_the_limit_is_saved_with_the_run_and_the_cli_takes_it(tmp_path):
    t = small(reward_time_limit=2.5)
    t.save(tmp_path / "c")
    assert Trainer.load(tmp_path / "c").rewarder.time_limit == 2.5
    args = build_parser().parse_args(["train", "--reward-time-limit", "2.5"])
    assert args.reward_time_limit == 2.5
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--reward-time-limit", "0"])
