"""One verifier call path: the Rewarder, held-out evaluation and VinePPO's prefix values all score through
``rlnb.stages.verify.call_limited`` under the run's ``reward_time_limit`` and ``reward_on_error``; a verifier
that sets its own SIGALRM keeps working on the main thread."""

import signal
import threading
import time

import pytest

from rlnb import Trainer
from rlnb.stages import Rewarder, RewardFunctionError
from rlnb.stages.reward import RewardTimeout
from rlnb.stages.verify import call_limited

HANG_S = 8  # a hanging verifier is released after this long: a test that waits it out has failed


@pytest.fixture
def hang():
    release = threading.Event()

    def reward(completion, answer):  # never answers until released
        release.wait(HANG_S)
        raise AssertionError("released: the time limit did not stop it")

    yield reward
    release.set()


def small(recipe="grpo", **kw):
    return Trainer.tiny(recipe, prompts_per_step=1, num_generations=2, max_new_tokens=4, **kw)


def boom(completion, answer):
    raise RuntimeError("verifier broke")


def test_evaluate_stops_a_hanging_verifier_within_the_time_limit(hang):
    t = small(reward_time_limit=0.3)
    t.task.reward = hang
    t0 = time.monotonic()
    with pytest.raises(RewardTimeout, match="no result within reward_time_limit=0.3 s"):
        t.evaluate(4)
    assert time.monotonic() - t0 < HANG_S / 2


def test_evaluate_follows_reward_on_error():
    t = small(reward_on_error="zero")
    t.task.reward = boom
    assert t.evaluate(4)["pass@1"] == 0.0               # every completion failed: none counts as correct
    t = small()
    t.task.reward = boom
    with pytest.raises(RewardFunctionError, match="reward function 'correct' raised RuntimeError: verifier broke"):
        t.evaluate(4)


def test_vineppo_prefix_values_stop_a_hanging_verifier_and_change_nothing(hang):
    t = small(advantage="vineppo", mc_rollouts=1, reward_time_limit=0.3)
    batch = t.rollout()
    t.task.reward = hang
    t0 = time.monotonic()
    with pytest.raises(RewardTimeout, match="reward function 'outcome': no result within"):
        t.valuer.step(batch)
    assert time.monotonic() - t0 < HANG_S / 2


def test_vineppo_prefix_values_score_a_raising_verifier_0_under_zero():
    t = small(advantage="vineppo", mc_rollouts=1, reward_on_error="zero")
    batch = t.rollout()
    t.task.reward = boom
    assert t.valuer.step(batch).extras["prefix_values"].eq(0).all()
    t = small(advantage="vineppo", mc_rollouts=1)
    batch = t.rollout()
    t.task.reward = boom
    with pytest.raises(RewardFunctionError, match="reward function 'outcome'"):
        t.valuer.step(batch)


def alarm_verifier(completions, answer, **kw):
    """Like signal-based math verifiers: its own SIGALRM timeout around the work (main thread only)."""
    def on_alarm(signum, frame):
        raise TimeoutError("verifier's own timeout")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(5)
    try:
        return [float(c == a) for c, a in zip(completions, answer)]
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_a_verifier_with_its_own_sigalrm_works_under_the_time_limit_on_the_main_thread():
    r = Rewarder({"correct": alarm_verifier}, time_limit=2.0)
    out = r.score(["3", "4"], ["3", "5"])
    assert out["correct"].tolist() == [1.0, 0.0] and r.errors == 0


def test_a_verifier_that_swallows_exceptions_is_still_stopped():
    def stubborn(completions, answer, **kw):
        end = time.monotonic() + HANG_S
        while time.monotonic() < end:
            try:
                time.sleep(0.05)
            except Exception:  # what a careless verifier does: the overrun must not be swallowed
                pass
        return [1.0] * len(completions)

    t0 = time.monotonic()
    with pytest.raises(RewardTimeout):
        call_limited(stubborn, ["x"], ["y"], time_limit=0.2, name="stubborn")
    assert time.monotonic() - t0 < HANG_S / 2


def test_off_the_main_thread_the_limit_still_holds(hang):
    box = {}

    def run():
        try:
            call_limited(lambda c, a: [hang(c, a)], ["x"], ["y"], time_limit=0.2, name="slow")
        except RewardTimeout as e:
            box["err"] = e

    th = threading.Thread(target=run)
    t0 = time.monotonic()
    th.start()
    th.join(HANG_S)
    assert "err" in box and time.monotonic() - t0 < HANG_S / 2


def test_the_watchdog_leaves_the_signal_handler_as_it_found_it():
    from rlnb.stages.verify import WATCHDOG_SIGNAL

    before = signal.getsignal(WATCHDOG_SIGNAL)
    assert call_limited(lambda c: [1.0], ["x"], time_limit=1.0, name="quick") == [1.0]
    assert signal.getsignal(WATCHDOG_SIGNAL) is before
