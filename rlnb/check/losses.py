"""Exercise checkers on the loss side: the clipped loss (05), the k3 estimator (06), aggregation (08), the
overlong penalty (02) and the score function (03). Reached as ``rlnb.check.<name>``."""

from __future__ import annotations

import torch

from rlnb import algos
from rlnb.check.base import Verdict, compare, with_hints


def _loss_cases() -> list[tuple]:
    ratio = torch.tensor([[0.5, 0.9, 1.0, 1.1, 1.5], [0.7, 1.25, 1.3, 2.0, 0.79]])
    return [(ratio, torch.tensor([1.0, 1.0])), (ratio, torch.tensor([-1.0, 2.0])), (ratio, torch.tensor([0.0, -0.5]))]


def ppo_clip_loss(fn, *, eps_low: float = 0.2, eps_high: float = 0.2, strict: bool = True) -> Verdict:
    """``fn(ratio (B, T), adv (B,)) -> (B, T)``: max(-A rho, -A clip(rho, 1 - eps_low, 1 + eps_high))."""
    def ref(ratio, adv):
        return algos.POLICY_LOSSES["ppo_clip"](ratio.log(), torch.zeros_like(ratio), adv, torch.ones_like(ratio),
                                               eps_low=eps_low, eps_high=eps_high).loss
    return compare("ppo_clip_loss", fn, ref, _loss_cases(), strict=strict)


def k3(fn, *, strict: bool = True) -> Verdict:
    """``fn(logp, ref_logp) -> k3``: exp(ref_logp - logp) + (logp - ref_logp) - 1."""
    g = torch.Generator().manual_seed(0)
    cases = [(torch.tensor([0.0, -1.0]), torch.tensor([0.0, -2.0])), (-torch.rand(3, 5, generator=g), -torch.rand(3, 5, generator=g))]
    return compare("k3", fn, algos.KL_ESTIMATORS["k3"], cases, strict=strict)


def _agg_cases() -> list[tuple]:
    loss = torch.tensor([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    return [(loss, mask), (loss * -1, mask)]


def token_mean(fn, *, strict: bool = True) -> Verdict:
    """``fn(loss (B, T), mask (B, T)) -> scalar``: sum of loss * mask over all tokens / number of tokens."""
    return compare("token_mean", fn, algos.AGGREGATIONS["token-mean"], _agg_cases(), strict=strict)


def seq_mean_token_mean(fn, *, strict: bool = True) -> Verdict:
    """``fn(loss (B, T), mask (B, T)) -> scalar``: mean over sequences of each sequence's token mean."""
    return compare("seq_mean_token_mean", fn, algos.AGGREGATIONS["seq-mean-token-mean"], _agg_cases(), strict=strict)


def overlong_penalty(fn, *, max_new_tokens: int = 16, overlong_buffer: int = 4, strict: bool = True) -> Verdict:
    """``fn(lengths (B,)) -> (B,)``: DAPO's soft overlong punishment for L_max = 16, L_cache = 4."""
    cases = [(torch.tensor([1, 12, 13, 14, 15, 16, 17]),), (torch.arange(20),)]
    def ref(n):
        return algos.overlong_penalty(n, max_new_tokens=max_new_tokens, overlong_buffer=overlong_buffer)
    hints = [(lambda n: -ref(n), "a penalty is negative: 0 down to -1"),
             (lambda n: -(n > max_new_tokens).float(), "that is the hard cut only; add the linear ramp over the last "
                                                        "L_cache tokens before L_max")]
    return with_hints("overlong_penalty", fn, ref, cases, hints, strict)


def _score(logits, v):
    return torch.nn.functional.one_hot(torch.as_tensor(v), logits.shape[-1]).to(logits.dtype) - logits.softmax(-1)


def score_function(fn, *, strict: bool = True) -> Verdict:
    """``fn(logits (V,), v) -> (V,)``: the gradient of log softmax(logits)[v] with respect to the logits,
    one_hot(v) - softmax(logits) (notebook 03: the score function of the policy gradient)."""
    g = torch.Generator().manual_seed(0)
    cases = [(torch.tensor([0.0, 0.0, 0.0, 0.0], dtype=torch.float64), 1),
             (torch.tensor([2.0, -1.0, 0.5], dtype=torch.float64), 0), (torch.randn(6, generator=g, dtype=torch.float64), 5)]
    hints = [(lambda z, v: -_score(z, v), "the sign: log pi(v) rises with its own logit z_v"),
             (lambda z, v: torch.nn.functional.one_hot(torch.as_tensor(v), z.shape[-1]).to(z.dtype),
              "log pi(v) = z_v - logsumexp(z): the logsumexp term contributes -softmax(z)"),
             (lambda z, v: _score(z, v) * z.softmax(-1)[v], "that is the gradient of pi(v), not of log pi(v): "
                                                           "divide by pi(v)")]
    return with_hints("score_function", fn, _score, cases, hints, strict)
