"""What follows a training run: widgets. The ``Dashboard`` (a ``Trainer.run`` callback) and the lab's panel:
``lab_panel`` (``Lab``: buttons, status), ``lab_knobs`` (its knob controls), ``lab_controls`` (branch, rewind and
scenario controls) and ``lab_dashboard`` (``LabDashboard``: curves with change lines and the fork). The engine they
drive is ``rlnb.lab``."""

from rlnb.viz.live.dashboard import Dashboard
from rlnb.viz.live.lab_panel import Lab

__all__ = ["Dashboard", "Lab"]
