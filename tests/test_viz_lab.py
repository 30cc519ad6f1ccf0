"""The lab's engine without a kernel: state machine, knobs at step boundaries, pause, rewind."""

import threading

import pytest
import torch

from rlnb import Trainer
from rlnb.lab import LabLoop

KNOBS = ("beta", "lr", "eps_high")


def tiny(**kw):
    return Trainer.tiny("grpo", **{"prompts_per_step": 2, "num_generations": 4, "max_new_tokens": 10, **kw})


def no_timing(history):
    return [{k: v for k, v in h.items() if not k.startswith("timing/")} for h in history]


def test_step_advances_exactly_one_and_logs_the_knobs():
    t = tiny()
    loop = LabLoop(t, knobs=KNOBS)
    assert loop.state == "paused" and t.step_count == 0
    rec = loop.step()
    assert t.step_count == 1 and len(t.history) == 1 and rec.metrics["step"] == 1
    assert t.history[0]["hp/beta"] == 0.0 and t.history[0]["hp/lr"] == t.recipe.lr
    assert loop.state == "paused"
    loop.close()


def test_step_stage_walks_the_four_stages_then_commits():
    t = tiny()
    loop = LabLoop(t)
    seen = []
    for _ in range(4):
        stage, batch = loop.step_stage()
        seen.append(stage)
        assert t.step_count == (1 if stage == "update" else 0)
    assert seen == ["sample", "reward", "advantage", "update"]
    assert batch.adv is not None
    with pytest.raises(RuntimeError, match="step_stage"):  # half-run step blocks step()
        loop.step_stage()
        loop.step()
    loop.close()  # abandons the half-run step: rolled back
    assert t.step_count == 1 and len(t.history) == 1


def test_play_returns_at_once_and_pause_stops_within_one_step():
    t = tiny()
    loop = LabLoop(t)
    started = threading.Event()
    loop.on_step = lambda rec: started.set()
    loop.play()
    assert loop.state == "playing"
    with pytest.raises(RuntimeError, match="playing"):
        loop.step()
    started.wait(60)
    seen = t.step_count
    loop.pause()
    assert loop.state == "paused" and not loop._thread.is_alive()
    assert seen <= t.step_count <= seen + 1  # the step in progress finishes, no other starts
    n = t.step_count
    loop.step()
    assert t.step_count == n + 1
    loop.close()


INTERRUPT = """
import _thread, signal, threading
signal.signal(signal.SIGINT, signal.default_int_handler)  # a background shell may have left SIGINT ignored
from rlnb import Trainer
from rlnb.lab import LabLoop
t = Trainer.tiny("grpo", prompts_per_step=2, num_generations=4, max_new_tokens=10)
loop = LabLoop(t)
loop.play()
threading.Timer(1.0, _thread.interrupt_main).start()  # what the kernel's stop button does
try:
    loop.wait(timeout=120)
    print("no interrupt")
except KeyboardInterrupt:
    ok = loop.state == "paused" and not loop._thread.is_alive()
    ok = ok and len(t.history) == t.step_count == len(t.records) and loop.kept.steps()[-1] == t.step_count
    print("consistent" if ok else f"inconsistent: {loop.state} {t.step_count} {len(t.history)} {len(t.records)}")
loop.close()
"""


def test_interrupting_a_wait_pauses_the_lab_with_the_trainer_consistent():
    """Run in a fresh interpreter's main thread: Ctrl-C reaches only the main thread, and pytest-xdist runs
    tests elsewhere."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", INTERRUPT], capture_output=True, text=True, timeout=300)
    assert out.stdout.strip().splitlines()[-1:] == ["consistent"], out.stdout[-1000:] + out.stderr[-2000:]


def test_knob_moved_while_playing_shows_from_the_next_step_on():
    t = tiny()
    loop = LabLoop(t, knobs=KNOBS)
    moved = {}

    def on_step(rec):
        if rec.metrics["step"] == 2 and not moved:
            loop.set("beta", 0.05)
            moved["at"] = t.step_count  # the steps committed when the change was queued
    loop.on_step = on_step
    loop.play(steps=5)
    loop._thread.join(120)
    hist = t.history
    assert len(hist) == 5 and moved["at"] == 2
    assert [h["hp/beta"] for h in hist] == [0.0, 0.0, 0.05, 0.05, 0.05]
    assert loop.changes[-1].step == 3 and "beta 0 -> 0.05 at step 3" in loop.status()
    assert hist[2]["kl"] >= 0 and t.ref_model is not None  # the reference is the starting model
    loop.close()


def test_invalid_values_are_refused_and_the_run_goes_on():
    t = tiny()
    loop = LabLoop(t, knobs=KNOBS)
    loop.play(steps=2)
    with pytest.raises(ValueError, match="beta"):
        loop.set("beta", -1.0)
    with pytest.raises(TypeError, match="num_generations"):
        loop.set("num_generations", 2.5)
    loop._thread.join(120)
    assert loop.error is None and t.step_count == 2 and loop.pending == {}
    assert all(h["hp/beta"] == 0.0 for h in t.history)
    loop.close()


def test_error_inside_a_step_leaves_the_trainer_consistent():
    t = tiny()
    loop = LabLoop(t)
    loop.step()
    w = {k: v.clone() for k, v in t.model.state_dict().items()}

    def boom(*a, **k):
        raise RuntimeError("reward exploded")
    t.advantager.step = boom
    loop.play()
    loop._thread.join(60)
    assert loop.state == "paused" and "reward exploded" in loop.error and t.step_count == 1
    assert all(torch.equal(w[k], v) for k, v in t.model.state_dict().items())
    loop.close()


def test_rewind_is_bit_exact():
    t = tiny(prompts_per_step=4, num_generations=8, max_new_tokens=32)  # enough groups with a reward spread to move the weights
    loop = LabLoop(t, knobs=KNOBS)
    loop.play(steps=2)
    loop._thread.join(120)
    assert t.step_count == 2 and loop.kept.steps() == [0, 2]  # kept where playing stopped
    loop.set("lr", 3e-4)
    for _ in range(3):
        loop.step()
    first = no_timing(t.history[2:])
    w_first = {k: v.clone() for k, v in t.model.state_dict().items()}
    assert loop.kept.steps() == [0, 2, 5]                       # every 5 steps; the change at 2 kept before it
    assert loop.rewind(2) == 2 and len(t.history) == 2 and t.recipe.lr == 1e-4 and not loop.changes
    assert loop.kept.steps() == [0, 2]                          # the abandoned future's points are dropped
    assert not all(torch.equal(w_first[k], v) for k, v in t.model.state_dict().items())
    loop.set("lr", 3e-4)
    for _ in range(3):
        loop.step()
    assert no_timing(t.history[2:]) == first and [h["hp/lr"] for h in first] == [3e-4] * 3
    assert all(torch.equal(w_first[k], v) for k, v in t.model.state_dict().items())
    assert loop.rewind(2) == 2 and loop.keep() == 2  # a kept point can be rewound to twice
    loop.close()


def test_two_labs_on_one_trainer_are_refused_and_close_releases():
    t = tiny()
    a = LabLoop(t)
    with pytest.raises(RuntimeError, match="another Lab"):
        LabLoop(t)
    a.play()
    b = LabLoop(t, replace=True)  # re-creating the lab stops the old one's thread
    assert a.closed and not a._thread.is_alive() and a.state == "paused"
    with pytest.raises(RuntimeError, match="closed"):
        a.play()
    b.close()
    LabLoop(t).close()
