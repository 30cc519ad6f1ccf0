"""The algorithm zoo: registries of small pure tensor functions, and a few stateful helpers.

Importing this package registers every entry. Look entries up by name::

    from rlnb.algos import ADVANTAGES, POLICY_LOSSES, AGGREGATIONS, KL_ESTIMATORS, FILTERS
"""

# importing a module registers its entries, in this order: the order tables and dropdowns list them
# isort: off
from rlnb.algos import (  # noqa: F401
    advantages,
    advantages_baselines,
    advantages_credit,
    advantages_token_baseline,
    advantages_passk,
    advantages_normalised,
    advantages_whitened,
    aggregation,
    filters,
    kl,
    losses,
    losses_covariance,
    losses_trust_region,
    losses_ratio_penalty,
    losses_vespo,
    rollout_correction,
)
# isort: on
from rlnb.algos.advantages import ADVANTAGES, gae
from rlnb.algos.advantages_token_baseline import sum_pi_squared
from rlnb.algos.aggregation import AGGREGATIONS
from rlnb.algos.entropy import ENTROPY_BONUSES, EntropyThermostat, entropy_bonus, top_entropy_mask
from rlnb.algos.filters import FILTERS, PassRateHistory
from rlnb.algos.kl import (
    KL_ESTIMATORS,
    AdaptiveKLController,
    k3_loss_optimum,
    kl_penalized_rewards,
    kl_regularised_optimum,
)
from rlnb.algos.losses import POLICY_LOSSES, LossOut
from rlnb.algos.losses_trust_region import bernoulli_kl, topk_divergence
from rlnb.algos.registry import Registry, bind, extra_inputs, hyper_names, knob_names
from rlnb.algos.rollout_correction import (
    ROLLOUT_CORRECTIONS,
    SEQUENCE_REDUCTIONS,
    Correction,
    importance_corrected_kl,
)
from rlnb.algos.shaping import overlong_penalty
from rlnb.algos.values import ValueHead, ValueLossOut, value_loss

__all__ = [
    "ADVANTAGES", "AGGREGATIONS", "ENTROPY_BONUSES", "FILTERS", "KL_ESTIMATORS", "POLICY_LOSSES",
    "ROLLOUT_CORRECTIONS", "SEQUENCE_REDUCTIONS", "AdaptiveKLController", "Correction", "EntropyThermostat", "LossOut", "PassRateHistory", "Registry",
    "ValueHead", "ValueLossOut",
    "bernoulli_kl", "bind", "entropy_bonus", "extra_inputs", "gae", "hyper_names", "importance_corrected_kl", "k3_loss_optimum", "kl_penalized_rewards", "kl_regularised_optimum", "knob_names",
    "overlong_penalty", "sum_pi_squared", "top_entropy_mask", "topk_divergence", "value_loss",
]
