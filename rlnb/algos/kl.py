"""KL estimators on sampled tokens, d = logp - ref_logp (Schulman, "Approximating KL divergence", 2020).
Signature: ``fn(logp, ref_logp) -> (B, T)`` per-token estimate of KL(pi || pi_ref).
"""

from __future__ import annotations

import torch

from rlnb.algos.registry import Registry

KL_ESTIMATORS = Registry("KL estimator")


@KL_ESTIMATORS.register("k3")
def k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k3 = exp(-d) + d - 1 >= 0, d = logp - ref_logp: unbiased, low variance (used by GRPO).

    >>> k3(torch.tensor([0.0, 1.0]), torch.tensor([0.0, 0.0]))
    tensor([0.0000, 0.3679])
    """
    d = logp - ref_logp
    return torch.exp(-d) + d - 1
