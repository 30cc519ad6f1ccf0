"""``Trainer.run``'s loop: steps with a progress bar, callbacks after each step, a clean stop on Ctrl-C."""

from __future__ import annotations

import contextlib

from rlnb.core.runtime import check_callbacks


def run_steps(trainer, steps: int | None, *, callbacks=(), progress: bool = True) -> list[dict]:
    """Train ``steps`` more steps (see ``Trainer.run``); ``None`` finishes an interrupted run."""
    from tqdm.auto import tqdm  # tqdm picks its notebook or terminal bar when the bar is made

    # the course's one label table ("mean reward", not "reward")
    from rlnb.viz.figures.theme import metric_label

    callbacks = check_callbacks(callbacks)
    if steps is not None:
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
            raise ValueError(f"steps: expected a non-negative int, got {steps!r}")
        trainer.run_target = trainer.step_count + steps
    elif trainer.run_target is None:
        raise ValueError("steps: expected a number of steps (there is no interrupted run to finish)")
    target = trainer.run_target
    hooks = [cb for cb in callbacks if hasattr(cb, "on_stage")]
    bar = tqdm(total=target, initial=trainer.step_count, disable=not progress, desc=f"{trainer.recipe.name}")
    notify = _Notifier(trainer, callbacks)
    try:
        while trainer.step_count < target:
            notify.called = 0  # callbacks called (or running) for the newest step
            record = trainer.step(callbacks=hooks)
            bar.update(1)
            bar.set_postfix_str(f"{metric_label('reward')} {record.metrics['reward']:.3f}", refresh=False)
            notify(callbacks, record)
        trainer.run_target = None
    except KeyboardInterrupt:
        if trainer.step_count > notify.seen and trainer.records:
            # Ctrl-C held during an update fires after the step is recorded, and a callback may itself
            # stop the run: the callbacks that have not yet seen that step see it now, once each.
            with contextlib.suppress(KeyboardInterrupt):
                notify(callbacks[notify.called:], trainer.records[-1])
        print(f"Interrupted after step {trainer.step_count}; state is intact. Call run() to finish "
              f"the remaining {target - trainer.step_count} steps.")
    finally:
        bar.close()
    return trainer.history


class _Notifier:
    """Calls the per-step callbacks and remembers how far they got (``called`` of the newest step, and
    ``seen``: the last step every callback has seen)."""

    def __init__(self, trainer, callbacks):
        self.trainer, self.called, self.seen = trainer, 0, trainer.step_count

    def __call__(self, callbacks, record) -> None:
        for cb in callbacks:
            self.called += 1
            if callable(cb):
                cb(self.trainer, record)
        self.seen = self.trainer.step_count
