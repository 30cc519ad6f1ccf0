"""The lab's engine, without widgets: a run played in a background thread, steered between steps.

- ``loop``: ``LabLoop``, play / pause / step / step a stage / knobs at step boundaries; it holds the parts below.
- ``player``: ``Player``, the background thread that plays, driving the trainers it steps.
- ``knobs``: ``Queue``, one branch's knob changes queued for its next step boundary, and ``check_live``.
- ``timeline``: ``Timeline``, the kept points and knob changes of the main run, and rewind (``Change`` records).
- ``points``: ``Point`` (a run copied bit-exact at a step boundary), ``take`` / ``put``, the bounded ``Kept``.
- ``fork``: ``Forks`` and its ``Branch``, a second branch in a trainer of its own (``spawn``), stepped after the main
  one; its memory check.
- ``staged``: ``StagedStep``, one step run a stage at a time in a helper thread.
- ``scenarios``: ``SCENARIOS``, runs set up to show one symptom, and the fix to try in a fork; ``measure_kl``.

Who drives a trainer is recorded in one place, ``rlnb.run.owner``; run state changes only through the Trainer
(``set_state``, ``reconfigure``, ``log_knobs``). The widgets live in ``rlnb.viz.live`` (``Lab``: the panel).
Nothing here imports a widget library.
"""

from rlnb.lab.fork import Branch, Forks
from rlnb.lab.loop import LabLoop
from rlnb.lab.scenarios import SCENARIOS, Scenario, describe, measure_kl
from rlnb.lab.timeline import Change, Timeline

__all__ = ["SCENARIOS", "Branch", "Change", "Forks", "LabLoop", "Scenario", "Timeline", "describe", "measure_kl"]
