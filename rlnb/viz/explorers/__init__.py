"""The explorers: sliders bound to a zoo function and a figure (``base.Explorer``). One module per
explorer; this one gathers them.

Every explorer works with no trainer (hand-made data) and with real data (``batch=``, ``stats=``,
``trainer=``). Each exposes ``.controls`` (name -> widget; the names are the hyperparameters' and
``Recipe`` fields' names), ``.fig`` (the live figure: set a control, read ``fig.data[i].y``),
``.values`` (the key numbers shown in the readout line), and ``.widget`` (display it, or display the
explorer itself). Creating an explorer twice gives two independent ones: no shared widgets, no
stacked callbacks.
"""

from rlnb.viz.explorers.advantage import AdvantageExplorer
from rlnb.viz.explorers.aggregation import AggregationExplorer
from rlnb.viz.explorers.base import Explorer
from rlnb.viz.explorers.block import BlockExplorer
from rlnb.viz.explorers.clip import ClipExplorer
from rlnb.viz.explorers.credit import CreditView
from rlnb.viz.explorers.entropy import EntropyView
from rlnb.viz.explorers.gae import GAEExplorer
from rlnb.viz.explorers.kl import KLExplorer
from rlnb.viz.explorers.tokens import TokenXRay

__all__ = ["AdvantageExplorer", "AggregationExplorer", "BlockExplorer", "ClipExplorer", "CreditView", "EntropyView", "Explorer", "GAEExplorer", "KLExplorer", "TokenXRay"]
