"""Exercise checkers on advantages and which groups are kept: chapters 03 (GRPO, RLOO), 10 (dynamic sampling)
and 12 (MaxRL). Reached as ``rlnb.check.<name>``."""

from __future__ import annotations

import torch

from rlnb import algos
from rlnb.check.base import Verdict, compare, with_hints


def _reward_cases(seed: int = 0) -> list[tuple]:
    g = torch.Generator().manual_seed(seed)
    cases = [(torch.tensor([1.0, 0.0, 0.0, 0.0]), 4), (torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0, 0.0]), 3),
             (torch.tensor([0.5, 0.5, 0.5, 0.5]), 2)]
    cases += [(torch.rand(12, generator=g), G) for G in (2, 3, 4)]
    return cases


def grpo_advantage(fn, *, strict: bool = True) -> Verdict:
    """``fn(rewards (B,), G) -> (B,)``: (r - group mean) / (group std (unbiased) + 1e-6)."""
    hints = [(lambda r, G: (r - r.mean()) / (r.std() + 1e-6), "use each group's mean and std (r.view(-1, G)), not the batch's"),
             (lambda r, G: algos.ADVANTAGES["grpo"](r, G, unbiased=False),
              "GRPO's std here is Bessel-corrected (unbiased=True, divide by G - 1)"),
             (lambda r, G: algos.ADVANTAGES["dr_grpo"](r, G), "you subtracted the group mean; now divide by the group's std")]
    return with_hints("grpo_advantage", fn, algos.ADVANTAGES["grpo"], _reward_cases(), hints, strict)


def rloo_advantage(fn, *, strict: bool = True) -> Verdict:
    """``fn(rewards (B,), G) -> (B,)``: r_i minus the mean of the *other* G-1 rewards of its group."""
    hints = [(lambda r, G: algos.ADVANTAGES["dr_grpo"](r, G), "the baseline must leave r_i out: (sum - r_i) / (G - 1)"),
             (lambda r, G: (r.view(-1, G) - (r.view(-1, G).sum(1, keepdim=True) - r.view(-1, G)) / G).reshape(-1),
              "the other rewards are G - 1, so divide their sum by G - 1, not G")]
    return with_hints("rloo_advantage", fn, algos.ADVANTAGES["rloo"], _reward_cases(), hints, strict)


def maxrl_advantage(fn, *, strict: bool = True) -> Verdict:
    """``fn(rewards (B,), G) -> (B,)``: (r - group mean) / (group mean + 1e-6) for rewards >= 0."""
    return compare("maxrl_advantage", fn, algos.ADVANTAGES["maxrl"], _reward_cases(), strict=strict)


def dynamic_sampling_keep(fn, *, strict: bool = True) -> Verdict:
    """``fn(correct (B,) bool, G) -> keep (B,) bool``: DAPO's dynamic-sampling predicate, True on every row
    of a group whose number of correct completions n satisfies 0 < n < G (groups contiguous)."""
    g = torch.Generator().manual_seed(0)
    cases = [(torch.tensor([1, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0]).bool(), 4),
             (torch.tensor([1, 0, 1, 1, 0, 0]).bool(), 2), (torch.rand(24, generator=g) < 0.5, 3),
             (torch.rand(32, generator=g) < 0.15, 8)]
    return compare("dynamic_sampling_keep", fn, lambda correct, G: algos.FILTERS["dynamic_sampling"](
        torch.zeros(len(correct)), G, correct=correct), cases, strict=strict)
