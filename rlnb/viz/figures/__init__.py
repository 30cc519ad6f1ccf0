"""Pure figure builders: data in, plotly figure out, no widgets and no kernel needed.

``zoo`` (the explorers' figures), ``train`` (dashboard, entropy, token X-ray), ``compute`` (the numbers the
figures plot, from zoo functions), ``theme`` (light/dark, human labels, one colour per recipe).
"""

from rlnb.viz.figures import batch, compute, credit, seeds, theme, train, zoo

__all__ = ["batch", "compute", "credit", "seeds", "theme", "train", "zoo"]
