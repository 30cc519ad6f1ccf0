"""The algorithm zoo: registries of small pure tensor functions.

Importing this package registers every entry. Look entries up by name::

    from rlnb.algos import ADVANTAGES, POLICY_LOSSES, AGGREGATIONS, KL_ESTIMATORS, FILTERS
"""

from rlnb.algos import advantages, aggregation, kl, losses  # noqa: F401  (registers entries)
from rlnb.algos.registry import Registry, bind, hyper_names
from rlnb.algos.advantages import ADVANTAGES
from rlnb.algos.aggregation import AGGREGATIONS
from rlnb.algos.kl import KL_ESTIMATORS
from rlnb.algos.losses import POLICY_LOSSES, LossOut

__all__ = [
    "ADVANTAGES", "AGGREGATIONS", "KL_ESTIMATORS", "POLICY_LOSSES", "LossOut",
    "Registry", "bind", "hyper_names",
]
