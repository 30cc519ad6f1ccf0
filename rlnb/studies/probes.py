"""Measurements the studies take besides the Trainer's own metrics.

- ``kl_to_reference``: the exact KL of the current policy to a frozen copy of the starting model, on
  the completions of a batch. The Trainer logs ``kl`` only when a reference exists (beta > 0) and then
  as an estimator (k3) on the training batch; to compare beta = 0 with beta > 0 on one scale, the
  studies keep their own frozen copy and use this exact per-token KL instead.
"""

from __future__ import annotations

import torch

from rlnb.batch import Batch
from rlnb.models.forward import completion_logits


@torch.no_grad()
def kl_to_reference(model, ref_model, batch: Batch, *, temperature: float = 1.0) -> float:
    """Token-mean of KL(pi(. | o_<t) || pi_ref(. | o_<t)) over the vocabulary, on ``batch``'s completions.

    Per token this is the exact KL between the two next-token distributions, sum_v p_v (log p_v -
    log q_v), not a one-sample estimate; averaged over the tokens of completions sampled from (nearly)
    pi, it estimates the per-token sequence KL E_pi[log pi(o)/pi_ref(o)] / |o|. Rows with no valid
    token are ignored. Returns 0.0 when ``model`` and ``ref_model`` have equal weights.
    """
    if batch.completion_ids is None or batch.mask is None:
        raise ValueError("batch: expected sampled completions (run the Sampler first)")
    inputs = (batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.mask)
    was_training = model.training
    model.eval()
    try:
        logits, _ = completion_logits(model, *inputs)                      # (B, T, V)
        ref_logits, _ = completion_logits(ref_model, *inputs)              # (B, T, V)
    finally:
        model.train(was_training)
    logp = torch.log_softmax(logits.double() / temperature, -1)
    logq = torch.log_softmax(ref_logits.double() / temperature, -1)
    kl = (logp.exp() * (logp - logq)).sum(-1)                            # (B, T)
    m = batch.mask.double()
    return float((kl * m).sum() / m.sum().clamp(min=1))


def zero_std_share(correct: torch.Tensor, group_size: int) -> float:
    """Share of groups of ``group_size`` consecutive samples whose rewards are all equal (no signal).

    ``correct`` is (N, M) bool: M samples for each of N prompts, M divisible by ``group_size``; the M
    samples of a prompt are cut into M / G disjoint groups.

    >>> zero_std_share(torch.tensor([[1, 1, 0, 1], [0, 0, 0, 0]]).bool(), 2)
    0.75
    """
    N, M = correct.shape
    if M % group_size:
        raise ValueError(f"group_size: expected a divisor of the {M} samples per prompt, got {group_size}")
    groups = correct.float().view(N, M // group_size, group_size)        # (N, M/G, G)
    return float((groups.std(-1, unbiased=False) == 0).float().mean())


def predicted_zero_std_share(p: torch.Tensor, group_size: int) -> float:
    """Expected share of zero-signal groups when prompt i is solved with probability p_i:
    mean_i p_i^G + (1 - p_i)^G (all right or all wrong).

    >>> predicted_zero_std_share(torch.tensor([0.5, 0.0]), 2)
    0.75
    """
    p = p.double()
    return float((p**group_size + (1 - p) ** group_size).mean())


def baseline_error(correct: torch.Tensor, group_size: int) -> float:
    """RMS error of the group mean (GRPO's baseline) against the prompt's pass rate estimated from all M
    samples: how noisy a G-sample baseline is. Expected value about sqrt(mean_i p_i (1 - p_i) (1/G - 1/M)).

    >>> round(baseline_error(torch.tensor([[1, 1, 0, 0]]).bool(), 2), 3)
    0.5
    """
    N, M = correct.shape
    if M % group_size:
        raise ValueError(f"group_size: expected a divisor of the {M} samples per prompt, got {group_size}")
    c = correct.double()
    p_hat = c.mean(-1, keepdim=True)                                     # (N, 1)
    means = c.view(N, M // group_size, group_size).mean(-1)               # (N, M/G)
    return float(((means - p_hat) ** 2).mean().sqrt())
