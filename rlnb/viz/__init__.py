"""Widgets for rlnb: move a slider, see the mechanism. Figures are plotly, controls ipywidgets.

Three layers, each importing only the ones above it:

- ``rlnb.viz.figures``: pure builders, data in, plotly figure out, testable without a kernel (``zoo``: the
  explorers' figures; ``train``: dashboard, entropy, token X-ray; ``seeds``: several seeds as a band or
  error bars (``seed_bands``, ``seed_bars``); ``batch``: a compact ``BatchView`` of a Batch; ``credit``: credit strips and the race (``credit_figure``,
  ``race_figure``, ``race_points``); ``compute``: the numbers they plot;
  ``theme``: light/dark, human labels, one colour per recipe).
- ``rlnb.viz.explorers``: sliders bound to a zoo function and a figure: ``AdvantageExplorer``,
  ``ClipExplorer``, ``KLExplorer``, ``AggregationExplorer``, ``EntropyView``, ``GAEExplorer``, ``TokenXRay``,
  ``BlockExplorer`` (the kernel's blocks), ``CreditView`` (Monte-Carlo credit per token).
- ``rlnb.viz.live``: what follows a training run: ``Dashboard`` (a ``Trainer.run`` callback) and the
  ``Lab`` (play / pause / step / rewind, knobs turned while it trains; its thread driver is
  ``rlnb.lab``).

``set_backend("widget" | "static" | "auto")``: a ``PlotView`` (``rlnb.viz.plotview``: rlnb's own widget, sent the
whole figure at every redraw), or a plain figure redrawn into an ``Output`` where custom widgets cannot load (chosen
automatically in Colab and VS Code). ``set_theme("light" | "dark")``: plotly
does not follow JupyterLab's theme. ``show_source(fn)``: the live source of a library function, highlighted. ``site``: with ``RLNB_SITE=1``, figures
and widgets display as static HTML that the course website draws (``scripts/build_site.py``).
"""

from rlnb.viz import site
from rlnb.viz.backend import get_backend, set_backend
from rlnb.viz.explorers import (
    AdvantageExplorer,
    AggregationExplorer,
    BlockExplorer,
    ClipExplorer,
    CreditView,
    EntropyView,
    GAEExplorer,
    KLExplorer,
    TokenXRay,
)
from rlnb.viz.figures import compute, theme
from rlnb.viz.figures.batch import BatchView
from rlnb.viz.figures.credit import credit_figure, race_figure, race_points
from rlnb.viz.figures.seeds import seed_bands, seed_bars
from rlnb.viz.figures.theme import get_theme, set_theme
from rlnb.viz.live import Dashboard, Lab
from rlnb.viz.source import show_source

if site.active():  # RLNB_SITE=1: notebooks executed for the course website (rlnb.viz.site)
    site.activate()
    set_backend("static")

__all__ = [
    "AdvantageExplorer", "AggregationExplorer", "BatchView", "BlockExplorer", "ClipExplorer", "CreditView", "Dashboard", "EntropyView", "GAEExplorer", "KLExplorer", "Lab",
    "TokenXRay", "compute", "credit_figure", "get_backend", "get_theme", "race_figure", "race_points", "seed_bands", "seed_bars", "set_backend", "set_theme", "show_source", "theme",
]
