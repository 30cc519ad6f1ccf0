"""The explorers: sliders bound to a zoo function and a figure. One module per explorer; this one
gathers them.

Every explorer works with no trainer (hand-made data) and with real data (``batch=``, ``stats=``,
``trainer=``). Each exposes ``.controls`` (name -> widget; the names are the hyperparameters' and
``Recipe`` fields' names), ``.fig`` (the live figure: set a control, read ``fig.data[i].y``),
``.values`` (the key numbers shown in the readout line), and ``.widget`` (display it, or display the
explorer itself). Creating an explorer twice gives two independent ones: no shared widgets, no
stacked callbacks.
"""

from rlnb.viz.controls import Explorer
from rlnb.viz.entropy_view import EntropyView
from rlnb.viz.explore_advantage import AdvantageExplorer
from rlnb.viz.explore_aggregation import AggregationExplorer
from rlnb.viz.explore_clip import ClipExplorer
from rlnb.viz.explore_kl import KLExplorer

__all__ = ["AdvantageExplorer", "AggregationExplorer", "ClipExplorer", "EntropyView", "Explorer", "KLExplorer"]
