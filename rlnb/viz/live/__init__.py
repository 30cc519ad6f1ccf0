"""What follows a training run: the ``Dashboard`` (a ``Trainer.run`` callback) and the ``Lab``."""

from rlnb.viz.live.dashboard import Dashboard
from rlnb.viz.live.lab import Lab

__all__ = ["Dashboard", "Lab"]
