"""Exercise checkers on reading a run's curves: reward hacking (07), the crash step (11), the ScaleRL curve fit
(12, 16). Reached as ``rlnb.check.<name>``."""

from __future__ import annotations

import torch

from rlnb.check.base import Verdict, compare, with_hints
from rlnb.studies.scaling import sigmoid_curve as _sigmoid_curve


def scalerl_curve(fn, *, strict: bool = True) -> Verdict:
    """``fn(C, A, B, C_mid, R0) -> R``: ScaleRL's R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) on a (N,)
    tensor of compute values, with R(0) = R0."""
    C = torch.tensor([0.0, 10.0, 100.0, 1000.0, 1e4], dtype=torch.float64)
    cases = [(C, 0.8, 1.0, 100.0, 0.2), (C, 0.5, 2.0, 300.0, 0.05), (C, 0.3, 0.5, 50.0, 0.25)]
    return compare("scalerl_curve", fn, lambda C, A, B, C_mid, R0: _sigmoid_curve(C, A=A, B=B, C_mid=C_mid, R0=R0),
                    cases, strict=strict)


def _hack_share(rewards, correct):
    return float(((rewards > 0) & ~correct).float().mean())


def hack_share(fn, *, strict: bool = True) -> Verdict:
    """``fn(rewards, correct) -> float``: the share of *all* completions that are paid (reward > 0) but
    not correct, from (B,) rewards and (B,) bool ``correct`` (notebook 07)."""
    cases = [(torch.tensor([1.0, 1.0, 0.0, 1.0]), torch.tensor([True, False, False, False])),
             (torch.tensor([0.0, 0.0, 1.0, 1.0, 1.0, 0.0]), torch.tensor([False, False, True, True, True, False])),
             (torch.tensor([0.0, 0.0]), torch.tensor([False, False]))]
    hints = [(lambda r, c: float(((r > 0) & ~c).float().sum() / (r > 0).float().sum().clamp(min=1)),
              "you divided by the paid completions; the share is over all completions (a mean over B)"),
             (lambda r, c: float((~c).float().mean()),
              "that is the share of wrong completions; a hack is wrong *and* paid (reward > 0)")]
    return with_hints("hack_share", fn, _hack_share, cases, hints, strict)


def _crash_step(rewards, drop):
    best = float("-inf")
    for i, r in enumerate(rewards):
        best = max(best, r)
        if r < best - drop:
            return i
    return None


def crash_step(fn, *, strict: bool = True) -> Verdict:
    """``fn(rewards, drop) -> int | None``: the first step index whose reward is more than ``drop`` below
    the best reward so far (the running maximum), None if there is none (notebook 11)."""
    cases = [([0.2, 0.5, 0.6, 0.1, 0.0], 0.3), ([0.5, 0.4, 0.45, 0.1], 0.3), ([0.1, 0.2, 0.3], 0.1),
             ([0.9, 0.95, 0.7, 0.2], 0.5), ([0.6, 0.2, 0.9, 0.3], 0.5)]
    hints = [(lambda r, d: next((i for i, x in enumerate(r) if x < r[0] - d), None),
              "compare with the best reward so far (a running max), not with the first step's"),
             (lambda r, d: next((i - 1 for i, x in enumerate(r) if x < max(r[: i + 1]) - d), None),
              "return the step that crashed, not the one before it"),
             (lambda r, d: next((i for i, x in enumerate(r) if x < max(r) - d), None),
              "the maximum must be over the steps so far, not over the whole run (a later peak is not known yet)")]
    return with_hints("crash_step", fn, _crash_step, cases, hints, strict)
