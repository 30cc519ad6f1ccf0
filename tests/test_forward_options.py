"""Forward options (kernel backend, LM-head path, padding) belong to a run: a cell that switches them on the
main thread never reaches a lab playing in the background; only ``Trainer.set_forward_options`` changes a
trainer, and it is recorded."""

import itertools
import time

import pytest

from rlnb import Trainer, kernels
from rlnb.core.forward_options import ForwardOptions, current, using
from rlnb.lab import LabLoop
from rlnb.models.buckets import padding
from rlnb.models.forward import lm_head_path

OTHER = {"backend": "torch", "lm_head": "reference", "padding": "padded"}  # each differs from the default
STEPS = 5


def tiny(**kw):
    return Trainer.tiny("grpo", prompts_per_step=2, num_generations=4, max_new_tokens=10, **kw)


def no_timing(history):
    return [{k: v for k, v in h.items() if not k.startswith("timing/")} for h in history]


def played(t, steps=STEPS):
    loop = LabLoop(t)
    loop.play(steps)
    loop.wait(timeout=300)
    loop.close()
    return no_timing(t.history)


@pytest.fixture(scope="module")
def undisturbed():
    return played(tiny())


def test_every_option_changes_the_bits_so_a_leak_would_show(undisturbed):
    """The race test below can fail: each option on its own gives a different history."""
    for name, value in OTHER.items():
        t = tiny(forward=ForwardOptions(**{name: value}))
        t.run(STEPS, progress=False)
        assert no_timing(t.history) != undisturbed, name


def test_a_playing_lab_ignores_every_option_switched_on_the_main_thread(undisturbed):
    t = tiny()
    loop = LabLoop(t)
    with padding("padded"), lm_head_path("reference"):        # a thread started inside the block
        kernels.set_backend("torch")
        loop.play(STEPS)
    combos = itertools.cycle(itertools.product(("torch", "chunked", "auto"), ("reference", "fused"),
                                               ("padded", "bucketed", "shared")))
    switches = 0
    try:
        while loop.state == "playing":
            backend, head, mode = next(combos)
            kernels.set_backend(backend)
            with padding(mode), lm_head_path(head):
                time.sleep(0.002)
                switches += 1
    finally:
        kernels.set_backend("auto")
        loop.close()
    assert switches > STEPS                                       # the switching overlapped the play
    assert t.step_count == STEPS and t.forward_changes == []
    assert no_timing(t.history) == undisturbed                    # bit for bit


def test_a_with_block_never_reaches_a_trainer_only_set_forward_options_does(undisturbed):
    t = tiny()
    with padding("padded"), lm_head_path("reference"):
        t.run(2, progress=False)                                  # the trainer's own options run
    assert no_timing(t.history) == undisturbed[:2]
    t.set_forward_options(padding="padded")
    assert t.forward_changes == [(3, ForwardOptions(), ForwardOptions(padding="padded"))]
    t.step()
    assert no_timing(t.history) != undisturbed[:3]
    assert current() == ForwardOptions()                           # the step put this thread's options back
    with pytest.raises(ValueError, match="padding: expected one of"):
        t.set_forward_options(padding="packed")
    with pytest.raises(TypeError, match="beta: not a forward option"):
        t.set_forward_options(beta=0.1)
    assert t.forward_options == ForwardOptions(padding="padded") and len(t.forward_changes) == 1


def test_a_playing_lab_refuses_a_change_from_another_thread():
    t = tiny()
    loop = LabLoop(t)
    loop.play(3)
    try:
        with pytest.raises(RuntimeError, match="set_forward_options: a playing Lab"):
            t.set_forward_options(lm_head="reference")
    finally:
        loop.close()
    assert t.forward_options == ForwardOptions() and t.forward_changes == []


def test_bad_options_name_the_argument():
    with pytest.raises(TypeError, match="forward: expected ForwardOptions"):
        tiny(forward="padded")
    with pytest.raises(ValueError, match="backend: expected one of"):
        ForwardOptions(backend="cuda")
    with pytest.raises(TypeError, match="options: expected ForwardOptions"):
        with using("padded"):
            pass
    with using(lm_head="reference"):
        assert current().lm_head == "reference"
    assert current() == ForwardOptions()
