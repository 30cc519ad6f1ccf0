"""Widgets for rlnb: move a slider, see the mechanism. Figures are plotly, controls ipywidgets.

- Explorers: ``AdvantageExplorer``, ``ClipExplorer``, ``KLExplorer``, ``AggregationExplorer``,
  ``EntropyView`` (``rlnb.viz.widgets``), and the ``TokenXRay`` (``rlnb.viz.tokens``).
- ``BatchView``: a compact view of a ``Batch`` (the fields set so far, its first rows).
- ``Dashboard``: live training curves as a ``Trainer.run`` callback (``rlnb.viz.dashboard``).
- ``Lab``: the loop's control panel: play / pause / step / rewind, knobs turned while it trains.
- Pure figure builders, usable without a kernel: ``rlnb.viz.figures``, ``rlnb.viz.figures_train``.
- ``set_backend("widget" | "static" | "auto")``: FigureWidget, or a plain figure redrawn into an
  ``Output`` where FigureWidget cannot load (chosen automatically in Colab and VS Code).
- ``set_theme("light" | "dark")``: plotly does not follow JupyterLab's theme.
- ``show_source(fn)``: the live source of a library function, highlighted.
"""

from rlnb.viz.backend import get_backend, set_backend
from rlnb.viz.batch_view import BatchView
from rlnb.viz.dashboard import Dashboard
from rlnb.viz.lab import Lab
from rlnb.viz.source import show_source
from rlnb.viz.theme import get_theme, set_theme
from rlnb.viz.tokens import TokenXRay
from rlnb.viz.widgets import AdvantageExplorer, AggregationExplorer, ClipExplorer, EntropyView, KLExplorer

__all__ = [
    "AdvantageExplorer", "AggregationExplorer", "BatchView", "ClipExplorer", "Dashboard", "EntropyView", "KLExplorer",
    "Lab", "TokenXRay", "get_backend", "get_theme", "set_backend", "set_theme", "show_source",
]
