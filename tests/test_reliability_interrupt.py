"""Interrupts and errors inside a step: the step is applied whole or not at all, and ``run()`` picks up
where it stopped with the same final metrics as an uninterrupted run."""

import os
import signal

import pytest
import torch

import rlnb
from tests.test_validation_table import fingerprint

# weight decay: every optimizer step moves the weights, so an update that was not undone would show
SMALL = dict(task="add", seed=1, prompts_per_step=2, num_generations=2, max_new_tokens=8, weight_decay=0.1)
STEPS = 3


@pytest.fixture(autouse=True)
def python_sigint_handler():
    """A process started in the background by a non-interactive shell (CI, nohup ... &) inherits SIGINT
    as *ignored*, and Python then installs no KeyboardInterrupt handler. Install it, as a terminal would."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def strip(history):
    return [{k: v for k, v in h.items() if not k.startswith("timing/")} for h in history]


@pytest.fixture(scope="module")
def reference():
    """The uninterrupted runs every interrupted run must match."""
    out = {}
    for recipe, kw in (("grpo", {}), ("grpo_mb", {"num_mini_batches": 2, "num_iterations": 2})):
        t = rlnb.Trainer.tiny("grpo", **SMALL, **kw)
        t.run(STEPS, progress=False)
        out[recipe] = strip(t.history)
    return out


class StopAt:
    """Raise KeyboardInterrupt (or send a real SIGINT) once, during step ``step`` after ``stage``; as a
    plain callback, remember the trainer's state after each completed step."""

    def __init__(self, stage, step=2, real_signal=False):
        self.stage, self.step, self.real_signal, self.fired, self.after = stage, step, real_signal, False, {}

    def on_stage(self, trainer, stage, batch):
        if stage == self.stage and trainer.step_count == self.step - 1 and not self.fired:
            self.fired, self.at_fire = True, fingerprint(trainer)
            if self.real_signal:
                os.kill(os.getpid(), signal.SIGINT)
            else:
                raise KeyboardInterrupt

    def __call__(self, trainer, record):
        self.after[trainer.step_count] = fingerprint(trainer)


@pytest.mark.parametrize("stage, real_signal", [("sample", False), ("reward", False), ("advantage", False),
                                                 ("update", False), ("sample", True)])
def test_interrupt_mid_step_applies_nothing_and_run_finishes_like_an_uninterrupted_run(reference, stage,
                                                                                       real_signal, capsys):
    t = rlnb.Trainer.tiny("grpo", **SMALL)
    stop = StopAt(stage, step=2, real_signal=real_signal)
    t.run(STEPS, callbacks=[stop], progress=False)
    assert stop.fired and "Interrupted after step 1" in capsys.readouterr().out
    assert t.step_count == 1 and len(t.history) == 1
    assert fingerprint(t) == stop.after[1]          # weights, optimizer, RNG, history, cursor: as after step 1
    if stage == "update":                            # the update had been applied when the interrupt came
        assert stop.at_fire["params"] != stop.after[1]["params"]
    t.run(progress=False)                            # finish the interrupted run
    assert strip(t.history) == reference["grpo"]


def test_sigint_during_the_update_is_held_until_the_step_is_recorded(reference, capsys):
    """A real Ctrl-C while the optimizer works: the step completes and is recorded, then run() stops."""
    t = rlnb.Trainer.tiny("grpo", **SMALL)
    one_step, calls = t.updater._one_step, []

    def interrupted(mb, rows):
        if t.step_count == 1 and not calls:
            calls.append(1)
            os.kill(os.getpid(), signal.SIGINT)     # arrives mid-update
        return one_step(mb, rows)

    t.updater._one_step = interrupted
    t.run(STEPS, progress=False)
    assert calls and t.step_count == 2 and len(t.history) == 2   # step 2 was applied whole and recorded
    assert "Interrupted after step 2" in capsys.readouterr().out
    t.run(progress=False)
    assert strip(t.history) == reference["grpo"]


def test_an_error_after_some_mini_batches_undoes_the_whole_update(reference):
    t = rlnb.Trainer.tiny("grpo", **SMALL, num_mini_batches=2, num_iterations=2)
    t.run(1, progress=False)
    before, weights = fingerprint(t), [p.detach().clone() for p in t.model.parameters()]
    one_step, calls = t.updater._one_step, []

    def fails_second(mb, rows):
        calls.append(1)
        if len(calls) == 2:
            moved = any(not torch.equal(a, p) for a, p in zip(weights, t.model.parameters()))
            assert moved, "the first mini-batch must have changed the weights for this test to mean anything"
            raise RuntimeError("out of memory (simulated)")
        return one_step(mb, rows)

    t.updater._one_step = fails_second
    with pytest.raises(RuntimeError, match="simulated"):
        t.step()
    assert fingerprint(t) == before
    t.updater._one_step = one_step
    t.run(STEPS - 1, progress=False)
    assert strip(t.history) == reference["grpo_mb"]


def test_without_safe_update_only_the_random_streams_are_restored():
    """The opt-out for models too big to copy: a failed update leaves its mini-batches applied."""
    t = rlnb.Trainer.tiny("grpo", **SMALL, num_mini_batches=2, safe_update=False)
    rng, weights = t.state().rng, [p.detach().clone() for p in t.model.parameters()]
    one_step, calls = t.updater._one_step, []

    def fails_second(mb, rows):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("boom")
        return one_step(mb, rows)

    t.updater._one_step = fails_second
    with pytest.raises(RuntimeError):
        t.step()
    assert all(torch.equal(rng[k], s) for k, s in t.state().rng.items()) and t.step_count == 0
    assert any(not torch.equal(a, p) for a, p in zip(weights, t.model.parameters()))


def test_an_error_in_a_controller_after_the_update_is_undone():
    """Failures between the optimizer step and the commit (metrics, controllers) undo the update too."""
    t = rlnb.Trainer.tiny("grpo", **SMALL, entropy_target=0.5)
    before = fingerprint(t)
    t.controllers[0].th.update = lambda entropy: 1 / 0
    with pytest.raises(ZeroDivisionError):
        t.step()
    assert fingerprint(t) == before


def test_save_load_continues_exactly(tmp_path):
    """Two steps, save, load into a new trainer, two more == four steps in one go (PPO: value head,
    reference model, KL in the reward, mini-batches, adaptive beta)."""
    kw = dict(SMALL, kl_target=0.01)
    whole = rlnb.Trainer.tiny("ppo", **kw)
    whole.run(4, progress=False)
    first = rlnb.Trainer.tiny("ppo", **kw)
    first.run(2, progress=False)
    first.save(tmp_path / "ck")
    second = rlnb.Trainer.load(tmp_path / "ck")
    second.run(2, progress=False)
    assert strip(second.history) == strip(whole.history)
    assert all(torch.equal(a, b) for a, b in zip(second.model.parameters(), whole.model.parameters()))


def test_checkpoints_are_atomic(tmp_path, monkeypatch):
    t = rlnb.Trainer.tiny("grpo", **SMALL)
    t.run(1, progress=False)
    ck = t.save(tmp_path / "ck")
    t.run(1, progress=False)
    import rlnb.core.runtime as ts

    def killed(*a, **k):
        raise KeyboardInterrupt  # dies halfway through writing the new checkpoint
    monkeypatch.setattr(ts.torch, "save", killed)
    with pytest.raises(KeyboardInterrupt):
        t.save(ck)
    monkeypatch.undo()
    assert rlnb.Trainer.load(ck).step_count == 1                    # the old checkpoint is whole
    os.replace(ck, tmp_path / "ck.old")                             # killed between the two renames
    assert rlnb.Trainer.load(ck).step_count == 1                    # falls back to <dir>.old
    t.save(ck)                                                      # the next save tidies up
    assert rlnb.Trainer.load(ck).step_count == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck"]


def test_callbacks_see_the_step_a_held_interrupt_completed():
    """Ctrl-C during an update fires right after the step is recorded: callbacks (dashboards, the CLI's
    metrics writer) must still be told about that step."""
    t = rlnb.Trainer.tiny("grpo", **SMALL)
    update = t.updater.step

    def interrupted(batch):
        if t.step_count == 1:
            os.kill(os.getpid(), signal.SIGINT)      # held until step 2 is recorded
        return update(batch)

    t.updater.step = interrupted
    seen = []
    t.run(STEPS, callbacks=[lambda trainer, record: seen.append(record.metrics["step"])], progress=False)
    assert t.step_count == 2 and seen == [1, 2]


def test_a_callback_that_stops_the_run_is_not_called_again():
    """A stop button implemented as a callback raising KeyboardInterrupt: the callbacks before it saw the
    step once, the ones after it see it too (once), and the stop itself is not re-raised."""
    t = rlnb.Trainer.tiny("grpo", **SMALL)
    seen = {"before": [], "stop": [], "after": []}

    def stop(trainer, record):
        seen["stop"].append(trainer.step_count)
        raise KeyboardInterrupt

    callbacks = [lambda tr, r: seen["before"].append(tr.step_count), stop,
                 lambda tr, r: seen["after"].append(tr.step_count)]
    t.run(STEPS, callbacks=callbacks, progress=False)
    assert t.step_count == 1 and seen == {"before": [1], "stop": [1], "after": [1]}
