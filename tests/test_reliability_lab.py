"""The playing run is the only thing a lab steps in the notebook's trainer: a fork steps in a trainer of its own,
its knobs are refused like ``set()`` refuses them before it starts, a scenario is not set up under a playing run,
and ``step_stage()`` after a Ctrl-C runs each stage once, in order."""

import json
import subprocess
import sys
import threading

import pytest
import torch

from rlnb import Trainer, tasks
from rlnb.lab import SCENARIOS, LabLoop, measure_kl
from rlnb.run import owner


def tiny(**kw):
    return Trainer.tiny("grpo", **{"prompts_per_step": 2, "num_generations": 4, "max_new_tokens": 8, **kw})


# --- a fork steps in its own trainer -------------------------------------------------------------------------

def test_the_notebooks_trainer_holds_the_main_run_even_while_the_fork_steps():
    """What a cell (or a second dashboard) reads from the trainer mid-step: seen from inside every forward of
    both branches, the trainer's step count never goes back and its recipe and history are the main run's."""
    t = tiny()
    loop = LabLoop(t, knobs=("lr",))
    seen = []
    t.model.register_forward_pre_hook(lambda m, a: seen.append(
        (t.step_count, t.recipe.lr, len(t.history), t.history[-1]["hp/lr"] if t.history else None)))
    loop.step()
    branch = loop.fork(lr=3e-4)
    for _ in range(2):
        loop.step()
    assert branch.trainer is not t and branch.trainer.model is not t.model
    assert len(seen) > 6 and [s[0] for s in seen] == sorted(s[0] for s in seen)   # never backwards
    assert {s[1] for s in seen} == {1e-4} and {s[3] for s in seen} <= {None, 1e-4}  # never the fork's lr
    assert all(n == step for step, _, n, _ in seen)                               # history follows step_count
    assert [h["hp/lr"] for h in t.history] == [1e-4] * 3 and [h["hp/lr"] for h in branch.history] == [1e-4, 3e-4, 3e-4]
    loop.close()


@pytest.mark.parametrize("recipe, knobs", [("ppo", {}), ("grpo", {"beta": 0.05, "pass_rate_threshold": 0.9})])
def test_a_same_knobs_fork_of_a_critic_a_reference_and_a_noisy_task_continues_bit_for_bit(recipe, knobs):
    """The fork's own trainer gets the value head, the pass rates and its own copy of the task's noise stream."""
    t = Trainer.tiny(recipe, task=tasks.noisy("add", sigma_sample=0.3, seed=3), prompts_per_step=2,
                     num_generations=4, max_new_tokens=8, **knobs)
    loop = LabLoop(t)
    loop.step()
    branch = loop.fork()
    for _ in range(2):
        loop.step()
    strip = lambda h: [{k: v for k, v in r.items() if not k.startswith("timing/")} for r in h]  # noqa: E731
    assert strip(branch.history) == strip(t.history) and len(t.history) == 3
    assert branch.trainer.task is not t.task and branch.trainer.ref_model is t.ref_model
    for m, f in zip(t.modules(), branch.trainer.modules()):
        assert all(torch.equal(a, b) for a, b in zip(m.state_dict().values(), f.state_dict().values()))
    loop.close()


def test_while_the_lab_plays_the_forks_own_trainer_is_driven_too():
    t = tiny()
    loop = LabLoop(t)
    loop.step()
    fork = loop.fork(beta=0.0).trainer
    first = threading.Event()
    loop.on_step = lambda rec: first.set()
    loop.play()
    try:
        assert first.wait(120), "the lab never took a step"
        with pytest.raises(RuntimeError, match=r"^step: a playing Lab is training this trainer.*lab\.pause\(\)"):
            fork.step()
        with pytest.raises(RuntimeError, match=r"^next_prompts: a playing Lab"):
            fork.next_prompts()
    finally:
        loop.pause()
    assert owner.driver(fork) is None and owner.driver(t) is None and loop.error is None
    assert len(fork.history) == t.step_count                                      # stepped with the main run
    loop.close()


# --- a fork's knobs are checked like set() before the fork starts ------------------------------------------

REFUSED_FORK_KNOBS = {
    "max_new_tokens past the context": ({"max_new_tokens": 100000}, r"^max_new_tokens: expected fewer"),
    "critic switched on": ({"critic": True}, r"^critic: cannot switch the value head on or off live"),
    "a bad value": ({"eps_high": -1.0}, r"^eps_high"),
}


@pytest.mark.parametrize("case", list(REFUSED_FORK_KNOBS))
def test_a_fork_knob_set_would_refuse_is_refused_before_the_fork_and_nothing_changes(case):
    knobs, message = REFUSED_FORK_KNOBS[case]
    t = tiny()
    loop = LabLoop(t)
    loop.step()
    recipe, kept, steps, history = t.recipe, loop.kept.steps(), t.step_count, list(t.history)
    with pytest.raises((ValueError, TypeError), match=message) as by_fork:
        loop.fork(**knobs)
    assert loop.fork_branch is None and t.recipe is recipe and loop.kept.steps() == kept
    assert t.step_count == steps and t.history == history
    with pytest.raises(type(by_fork.value)) as by_set:
        loop.set_many(knobs)                                                      # the same refusal, word for word
    assert str(by_set.value) == str(by_fork.value) and t.recipe is recipe and loop.pending == {}
    assert loop.step().metrics["step"] == 2 and loop.fork_branch is None         # the main run goes on, alone
    assert loop.fork(beta=0.05).since == 2                                        # and a good fork still starts
    loop.close()


def test_a_fork_knob_its_trainer_refuses_is_refused_at_once_paused_and_dropped_at_a_later_boundary():
    t = tiny()
    loop = LabLoop(t)
    branch = loop.fork()
    recipe = branch.recipe
    with pytest.raises(ValueError, match=r"^max_new_tokens: expected fewer"):
        loop.set("max_new_tokens", 100000, branch="fork")
    assert branch.recipe is recipe and branch.pending == {} and loop.error.startswith("ValueError: max_new_tokens")
    assert loop.step_stage()[0] == "sample"
    loop.set("max_new_tokens", 100000, branch="fork")                # mid-step: queued for the fork's boundary
    assert branch.pending == {"max_new_tokens": 100000}
    while loop.step_stage()[0] != "update":
        pass
    # dropped at the fork's boundary and named in lab.error; the fork stepped with the knobs it had
    assert branch.recipe is recipe and branch.pending == {} and loop.error.startswith("ValueError: max_new_tokens")
    assert len(branch.history) == t.step_count == 1
    loop.close()


# --- a scenario is set up paused -----------------------------------------------------------------------------

@pytest.mark.parametrize("name, reference", [("drift", False), ("drift", True), ("instability", True),
                                             ("no signal", False)])
def test_setting_a_scenario_up_while_the_lab_plays_is_refused_and_changes_nothing(name, reference):
    t = tiny()
    loop = LabLoop(t)
    if reference:
        measure_kl(t)                                                             # as the Lab panel does
    ref, recipe = t.ref_model, t.recipe
    first = threading.Event()
    loop.on_step = lambda rec: first.set()
    loop.play()
    try:
        assert first.wait(120), "the lab never took a step"
        with pytest.raises(RuntimeError, match=r"^set_up: the lab is playing; pause\(\) first"):
            loop.set_up(name)
        assert loop.pending == {} and t.ref_model is ref and loop.state == "playing"
    finally:
        loop.pause()
    assert t.recipe is recipe and t.ref_model is ref and loop.error is None
    loop.set_up(name)                                                              # paused: set up at once
    assert all(getattr(t.recipe, k) == v for k, v in SCENARIOS[name].setup.items())
    assert (t.ref_model is not None) == (reference or SCENARIOS[name].reference)
    loop.close()


# --- Ctrl-C while step_stage() waits ----------------------------------------------------------------------------

STAGE_INTERRUPT = """
import json, signal, sys, threading, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # a background shell may have left SIGINT ignored
from rlnb import Trainer
from rlnb.lab import LabLoop
slow = sys.argv[1]
t = Trainer.tiny("grpo", prompts_per_step=2, num_generations=4, max_new_tokens=8)
calls = []
def timed(name, step):
    def run(*a, **k):
        calls.append(name)
        time.sleep(2.0 if name == slow else 0.0)
        return step(*a, **k)
    return run
for name, part in (("sample", t.sampler), ("reward", t.rewarder), ("advantage", t.advantager), ("update", t.updater)):
    part.step = timed(name, part.step)
loop = LabLoop(t)
got = []
def stage():
    name, batch = loop.step_stage()
    time.sleep(0.3)  # time for a stage that was not asked for to start
    got.append([name, list(calls)] + (["rewarded" if batch.rewards is not None else "no rewards"]
                                       if name == "reward" else []))
for _ in range(["sample", "reward", "advantage", "update"].index(slow)):
    stage()
main = threading.main_thread().ident
threading.Timer(0.5, lambda: signal.pthread_kill(main, signal.SIGINT)).start()  # Ctrl-C while it waits
try:
    stage()
except KeyboardInterrupt:
    got.append("^C")
time.sleep(2.5)  # the slow stage ends meanwhile
while got[-1] == "^C" or got[-1][0] != "update":
    stage()
print(json.dumps({"got": got, "steps": t.step_count, "history": len(t.history)}))
loop.close()
"""


@pytest.mark.parametrize("slow", ["sample", "reward"])
def test_after_a_ctrl_c_while_step_stage_waits_each_stage_runs_once_in_order(slow):
    """In a fresh interpreter's main thread (Ctrl-C reaches only the main thread). Each call runs the next stage
    and nothing more: after it returns, the stages run so far are exactly those returned."""
    out = subprocess.run([sys.executable, "-c", STAGE_INTERRUPT, slow], capture_output=True, text=True, timeout=300)
    result = json.loads(out.stdout.strip().splitlines()[-1]) if out.stdout.strip() else out.stderr[-2000:]
    stages = ["sample", "reward", "advantage", "update"]
    want = [[s, stages[:i + 1]] + (["rewarded"] if s == "reward" else []) for i, s in enumerate(stages)]
    at = stages.index(slow)
    assert result == {"got": want[:at] + ["^C"] + want[at:], "steps": 1, "history": 1}, out.stderr[-2000:]
