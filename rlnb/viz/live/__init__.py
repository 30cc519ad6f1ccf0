"""What follows a training run: widgets. The ``Dashboard`` (a ``Trainer.run`` callback) and the lab's panel:
``lab_panel`` (``Lab``: buttons, knobs, status), ``lab_controls`` (its branch and rewind controls) and
``lab_dashboard`` (``LabDashboard``: its curves with change lines and the fork). The engine they drive is
``rlnb.lab``."""

from rlnb.viz.live.dashboard import Dashboard
from rlnb.viz.live.lab_panel import Lab

__all__ = ["Dashboard", "Lab"]
