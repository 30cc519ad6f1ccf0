"""Exercise checkers with hints for the mechanics chapters (05 ratio and clipping, 06 KL and entropy, 08
aggregation). Reached as ``rlnb.check.<name>``; each names the common wrong answers when it sees one.

"""

from __future__ import annotations

import math

import torch

from rlnb.check.base import Verdict, with_hints

EPS_LOW, EPS_HIGH = 0.2, 0.28  # asymmetric on purpose: a solution that swaps them fails


def _clip_weight(ratio, adv):
    A = adv[:, None]                                                   # (B, 1)
    cut = ((A > 0) & (ratio > 1 + EPS_HIGH)) | ((A < 0) & (ratio < 1 - EPS_LOW))
    return A * ratio * ~cut                                            # (B, T)


def clip_weight(fn, *, strict: bool = True) -> Verdict:
    """``fn(ratio, adv) -> (B, T)``: the weight PPO's clipped loss puts on grad log pi of each token
    (ratio (B, T), adv (B,), eps_low 0.2, eps_high 0.28): A rho where the unclipped term is active, 0 where
    the clipped constant wins (notebook 05)."""
    rho = torch.tensor([[0.7, 0.75, 0.9, 1.0, 1.25, 1.3, 1.5]], dtype=torch.float64)
    cases = [(rho.expand(4, -1).clone(), torch.tensor([1.0, -1.0, 0.5, 0.0], dtype=torch.float64)),
             (torch.tensor([[0.5, 2.0], [0.79, 1.29]], dtype=torch.float64), torch.tensor([-2.0, 1.5], dtype=torch.float64))]
    between = lambda r: (r >= 1 - EPS_LOW) & (r <= 1 + EPS_HIGH)  # noqa: E731
    hints = [
        (lambda r, a: a[:, None] * ~(((a[:, None] > 0) & (r > 1 + EPS_HIGH)) | ((a[:, None] < 0) & (r < 1 - EPS_LOW))) + 0 * r,
         "the unclipped term is -A rho, and d(-A rho)/d log pi = -A rho: the weight carries the ratio, it is not A alone"),
        (lambda r, a: a[:, None] * r * between(r),
         "the clip is one-sided per sign of A: a good token that lost probability (A > 0, rho < 1 - eps_low) keeps its weight"),
        (lambda r, a: a[:, None] * r + 0 * r,
         "outside the range, in the direction A pushes, the clipped term wins and it is a constant: weight 0 there"),
        (lambda r, a: a[:, None] * r * ~(((a[:, None] > 0) & (r > 1 + EPS_LOW)) | ((a[:, None] < 0) & (r < 1 - EPS_HIGH))),
         "eps_high bounds the ratio above (it matters for A > 0), eps_low below (A < 0): you swapped them"),
    ]
    return with_hints("clip_weight", fn, _clip_weight, cases, hints, strict)


def _k3_pull(d):
    return torch.exp(-d) - 1


def k3_pull(fn, *, strict: bool = True) -> Verdict:
    """``fn(d) -> tensor``: the weight a beta = 1 k3 penalty puts on grad log pi of a sampled token, with
    d = log pi - log pi_ref: -d k3 / d(log pi) = exp(-d) - 1 (notebook 06)."""
    cases = [(torch.tensor([-math.log(2), 0.0, math.log(2)], dtype=torch.float64),),
             (torch.linspace(-3, 3, 13, dtype=torch.float64),)]
    hints = [(lambda d: torch.exp(-d) + d - 1, "that is k3's value; the exercise asks for its pull, minus its derivative in log pi"),
             (lambda d: 1 - torch.exp(-d), "right size, wrong sign: the pull is minus the derivative (the loss is minimised)"),
             (lambda d: -d, "that is k2's pull (-d k2/d log pi = -d); k3's derivative is 1 - exp(-d)"),
             (lambda d: -torch.ones_like(d), "that is k1's pull: -1 on every token whatever d")]
    return with_hints("k3_pull", fn, _k3_pull, cases, hints, strict)


def _per_token_weight(lengths, normaliser, L):
    n = lengths.to(torch.float64)
    if normaliser == "token-mean":
        return torch.full_like(n, 1.0) / n.sum()
    if normaliser == "seq-mean-token-mean":
        return 1.0 / (len(n) * n)
    return torch.full_like(n, 1.0) / (len(n) * L)                      # seq-mean-token-sum-norm


def per_token_weight(fn, *, strict: bool = True) -> Verdict:
    """``fn(lengths, normaliser, L) -> (B,)``: the weight each token of sequence i gets in the aggregated
    loss, for lengths (B,) and ``normaliser`` in token-mean, seq-mean-token-mean, seq-mean-token-sum-norm
    (constant L) (notebook 08)."""
    names = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")
    cases = [(torch.tensor(ls), name, 32) for ls in ([4, 20], [3, 5, 8, 16], [10, 10, 10]) for name in names]
    hints = [(lambda n, name, L: torch.full((len(n),), 1.0 / len(n), dtype=torch.float64),
              "that is the weight of a whole sequence under seq-mean; the question is per *token*"),
             (lambda n, name, L: _per_token_weight(n, name, L) * len(n),
              "divide by the number of sequences B too: the weights of all tokens must sum to 1 (token-mean, seq-mean)"),
             (lambda n, name, L: 1.0 / (len(n) * n.to(torch.float64)),
              "that is seq-mean-token-mean for every normaliser; token-mean and the constant L weigh every token the same")]
    return with_hints("per_token_weight", fn, _per_token_weight, cases, hints, strict)


def _clip_can_fire(mu, mini_batches, off_policy):
    return mu > 1 or mini_batches > 1 or off_policy


def clip_can_fire(fn, *, strict: bool = True) -> Verdict:
    """``fn(mu, mini_batches, off_policy) -> bool``: whether the ratio can leave 1, so the clip can act: the batch
    is reused (mu epochs over it, or several mini-batches, each after the previous one's update) or the loss
    reads log-probs of another policy than the one it differentiates (``off_policy``) (notebook 13)."""
    cases = [(mu, mb, off) for mu in (1, 2, 4) for mb in (1, 2) for off in (False, True)]
    hints = [
        (lambda mu, mb, off: mu > 1 or off,
         "mini-batches reuse the batch too: the second mini-batch is scored by a policy the first one already moved"),
        (lambda mu, mb, off: mu > 1 or mb > 1,
         "a loss that reads another policy's log-probs (the rollout engine's, say) has a ratio != 1 even at mu = 1"),
        (lambda mu, mb, off: mu > 1,
         "the ratio leaves 1 as soon as any update happens before the batch is scored again: mu > 1, or several "
         "mini-batches, or log-probs from another policy"),
    ]
    return with_hints("clip_can_fire", fn, _clip_can_fire, cases, hints, strict)
