"""Entropy regularisation: a fixed bonus (``ENTROPY_BONUSES``: how the per-token entropies become one
number, TRL's or verl's way), a thermostat that adapts its coefficient, and the top-entropy token mask.

Per-token entropy H_t = logsumexp(z) - sum softmax(z) z comes from ``rlnb.logprobs.token_logprobs(...,
entropy=True)``. A *bonus* is subtracted from the loss, so minimising the loss raises entropy.
Monitoring entropy is what shows collapse; the bonus and the thermostat are countermeasures.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rlnb.algos.aggregation import token_mean
from rlnb.algos.registry import Registry
from rlnb.core.checks import check_number

ENTROPY_BONUSES = Registry("entropy bonus")


@ENTROPY_BONUSES.register("pushed-token-mean")
def pushed_token_mean(entropy: torch.Tensor, mask: torch.Tensor, pushed: torch.Tensor | None = None,
                      aggregate: Callable | None = None) -> torch.Tensor:
    """TRL 1.16's entropy bonus (the entropy regulariser of A3C, arXiv 1602.01783): H_bar = sum(H m E) / sum(m E),
    a token mean over the tokens the policy gradient reaches (E: ``top_entropy_mask``, Beyond the 80/20 rule,
    arXiv 2506.01939; all valid tokens when None), whatever the loss's aggregation.

    entropy, mask, pushed (B, T) -> scalar; ``aggregate`` is ignored (the same signature as
    ``loss_aggregation``). H = [[.1, .9], [.5, .3]] and E = [[0, 1], [1, 0]]: (0.9 + 0.5) / 2 = 0.7.

    >>> H, m = torch.tensor([[.1, .9], [.5, .3]]), torch.ones(2, 2)
    >>> pushed_token_mean(H, m, torch.tensor([[0., 1.], [1., 0.]])), pushed_token_mean(H, m)
    (tensor(0.7000), tensor(0.4500))
    """
    w = mask if pushed is None else mask * pushed.to(mask.dtype)      # (B, T) tokens the bonus acts on
    return (entropy * w).sum() / w.sum().clamp(min=1)


@ENTROPY_BONUSES.register("loss-aggregation")
def loss_aggregation(entropy: torch.Tensor, mask: torch.Tensor, pushed: torch.Tensor | None = None,
                     aggregate: Callable | None = None) -> torch.Tensor:
    """verl 0.9.1's entropy bonus (A3C's regulariser, arXiv 1602.01783): H_bar = agg(H, m) with the policy
    loss's own aggregation (``aggregate``,
    token-mean when None) over every valid token; ``pushed`` is ignored (verl has no top-entropy mask).

    Lengths 3 and 1, H = [[.2, .4, .6], [.6, 0, 0]] under seq-mean-token-mean: (0.4 + 0.6) / 2 = 0.5,
    where the token mean (TRL) is 1.8 / 4 = 0.45.

    >>> from rlnb.algos.aggregation import seq_mean_token_mean
    >>> H, m = torch.tensor([[.2, .4, .6], [.6, 0, 0]]), torch.tensor([[1., 1, 1], [1, 0, 0]])
    >>> loss_aggregation(H, m, None, seq_mean_token_mean), pushed_token_mean(H, m)
    (tensor(0.5000), tensor(0.4500))
    """
    return (aggregate or token_mean)(entropy, mask)


def entropy_bonus(entropy: torch.Tensor, mask: torch.Tensor, aggregate: Callable | None = None,
                  pushed: torch.Tensor | None = None, *, entropy_coef: float = 0.0,
                  rule: Callable = pushed_token_mean) -> torch.Tensor:
    """The loss term -entropy_coef * H_bar: add it to the policy loss.

    entropy, mask, pushed (B, T) -> scalar. ``rule`` is an ``ENTROPY_BONUSES`` entry: TRL 1.16's token mean
    over the pushed tokens by default (``pushed_token_mean``), or verl 0.9.1's ``loss_aggregation`` with the
    loss's ``aggregate`` (pass a bound one when it needs ``group_size`` or ``max_new_tokens``).
    ``entropy_coef = 0`` gives exactly 0.

    >>> entropy_bonus(torch.tensor([[1.0, 3.0]]), torch.ones(1, 2), entropy_coef=0.01)
    tensor(-0.0200)
    """
    check_number("entropy_coef", entropy_coef)
    if aggregate is not None and not callable(aggregate):
        raise TypeError(f"aggregate: expected an aggregation fn(loss, mask), got {aggregate!r}")
    if not callable(rule):
        raise TypeError(f"rule: expected an ENTROPY_BONUSES entry fn(entropy, mask, pushed, aggregate), got {rule!r}")
    if pushed is not None and pushed.shape != mask.shape:
        raise ValueError(f"pushed: expected shape {tuple(mask.shape)} like mask, got {tuple(pushed.shape)}")
    return -entropy_coef * rule(entropy, mask, pushed, aggregate)


def top_entropy_mask(entropy: torch.Tensor, mask: torch.Tensor, *, top_entropy_quantile: float = 1.0) -> torch.Tensor:
    """Keep the tokens whose entropy is in the top ``top_entropy_quantile`` of the batch's valid tokens.

    Wang et al., "Beyond the 80/20 Rule: High-Entropy Minority Tokens Drive Effective RL for LLM
    Reasoning" (arXiv 2506.01939): restricting the policy gradient to the ~20% highest-entropy "forking"
    tokens (rho = 0.2) matches or beats training on all tokens. Same name and rule as TRL's
    ``top_entropy_quantile``: threshold tau = the (1 - rho) quantile of the valid tokens' entropies
    (``torch.quantile``, linear interpolation), keep H_t >= tau. 1.0 keeps every valid token, 0.0 only
    the maximum. Shapes: entropy, mask (B, T) -> (B, T) bool, False where mask is 0; no gradient.

    Valid entropies 0.1, 0.9, 0.5, 0.3, 0.7 and rho = 0.4: tau = quantile 0.6 = 0.5 + 0.4 * 0.2 = 0.58.

    >>> top_entropy_mask(torch.tensor([[0.1, 0.9, 0.5], [0.3, 0.7, 9.0]]), torch.tensor([[1, 1, 1], [1, 1, 0]]),
    ...                  top_entropy_quantile=0.4)
    tensor([[False,  True, False],
            [False,  True, False]])
    """
    if entropy.shape != mask.shape or entropy.dim() != 2:
        raise ValueError(f"entropy, mask: expected equal (B, T) shapes, got {tuple(entropy.shape)} and "
                         f"{tuple(mask.shape)}")
    if isinstance(top_entropy_quantile, bool) or not 0 <= top_entropy_quantile <= 1:
        raise ValueError(f"top_entropy_quantile: expected a number in [0, 1], got {top_entropy_quantile!r}")
    valid = mask.bool()
    H = entropy.detach().double()                                      # (B, T) fp64: exact comparisons
    if top_entropy_quantile == 1 or not valid.any():
        return valid.clone()
    tau = torch.quantile(H[valid], 1 - float(top_entropy_quantile))
    return (H >= tau) & valid


class EntropyThermostat:
    """Adaptive entropy coefficient (Skywork-OR1, arXiv 2505.22312, "adaptive entropy control").

    Each step k, with e_k the batch's mean token entropy (nats):
        alpha_k = c_k * 1[e_k <= target]           (coefficient used in this step's loss)
        c_{k+1} = clip(c_k + delta * sign(target - e_k), coef_min, coef_max)
    so c rises by ``delta`` while entropy is below the target and falls above it, and the bonus is
    only switched on below the target (``gate=True``, the paper's rule as we read it; ``gate=False``
    always applies c_k, a plain thermostat). Defaults are the authors' released 7B script: c_0 = 0,
    target 0.2, delta 1e-4, range [0, 0.005]. Those targets are for large LLMs; the toy model's
    entropy sits around 0.1-0.6, so set the target from a baseline run.

    >>> th = EntropyThermostat(target=0.5, coef=0.0, delta=0.01, coef_max=0.015)
    >>> [th.update(e) for e in (0.3, 0.3, 0.3, 0.9)]  # alpha_k returned before c moves
    [0.0, 0.01, 0.015, 0.0]
    >>> th.coef
    0.005
    """

    def __init__(self, target: float = 0.2, *, coef: float = 0.0, delta: float = 1e-4,
                 coef_min: float = 0.0, coef_max: float = 0.005, gate: bool = True):
        for name, v in (("target", target), ("coef", coef), ("delta", delta), ("coef_min", coef_min),
                        ("coef_max", coef_max)):
            check_number(name, v)
        if not coef_min <= coef <= coef_max or delta < 0:
            raise ValueError(f"coef: expected coef_min <= coef <= coef_max and delta >= 0, got "
                             f"coef={coef}, coef_min={coef_min}, coef_max={coef_max}, delta={delta}")
        self.target, self.coef, self.delta = target, coef, delta
        self.coef_min, self.coef_max, self.gate = coef_min, coef_max, gate

    def update(self, entropy: float) -> float:
        """Feed this step's mean entropy; returns alpha_k for this step's loss, then moves c."""
        e = check_number("entropy", entropy)  # a NaN would freeze the coefficient without a word
        alpha = self.coef if (e <= self.target or not self.gate) else 0.0
        step = self.delta if e < self.target else (-self.delta if e > self.target else 0.0)
        # round away float dust (0.015 - 0.01 = 0.004999...) so logged coefficients read cleanly
        self.coef = round(min(max(self.coef + step, self.coef_min), self.coef_max), 12)
        return alpha
