"""Countdown: reach a target from given numbers with + - * / (each number used exactly once).

Prompt ``[3 7 25]>46:``, a correct completion ``25+3*7``. The answer string carries the numbers and the
target (``3 7 25=46``). Completions are parsed by ``rlnb.tasks.safe_math`` (exact fractions, bounded
size and depth), never evaluated as code.
"""

from __future__ import annotations

import random
from fractions import Fraction

from rlnb.core.checks import check_int
from rlnb.tasks.base import Task, register
from rlnb.tasks.safe_math import MAX_DIGITS, parse_expr

PROBE, MIN_HITS, MAX_DRAWS = 256, 8, 10_000  # at least 1 draw in 32 lands; a row gives up after 10k draws


@register("countdown")
class Countdown(Task):
    """``n_numbers`` numbers in ``[1, max_number]``; targets are reachable by construction."""

    description = "reach the target from the given numbers with + - * /, each number once"

    def __init__(self, n_numbers: int = 3, max_number: int = 20, max_target: int = 200):
        self.n_numbers = check_int("n_numbers", n_numbers, low=2, high=6)
        self.max_number = check_int("max_number", max_number, low=1, high=10**MAX_DIGITS - 1)  # what the parser reads
        self.max_target = check_int("max_target", max_target, low=1, high=10**MAX_DIGITS - 1)
        # Targets are drawn by rejection: refuse settings where few draws land in [1, max_target], so that
        # no dataset takes more than about PROBE / MIN_HITS draws per row (and none loops forever).
        rng = random.Random("countdown-probe")
        hits = sum(self._draw(rng)[2] is not None for _ in range(PROBE))
        if hits < MIN_HITS:
            raise ValueError(f"max_target: only {hits} of {PROBE} random expressions of {n_numbers} numbers in "
                             f"[1, {max_number}] reach a target in [1, {max_target}]; raise max_target or "
                             "lower max_number")

    def _draw(self, rng):
        nums = [rng.randint(1, self.max_number) for _ in range(self.n_numbers)]
        order = rng.sample(nums, len(nums))
        expr = str(order[0]) + "".join(rng.choice("+-*") + str(x) for x in order[1:])
        value, _ = parse_expr(expr)
        ok = value.denominator == 1 and 1 <= value <= self.max_target
        return nums, expr, int(value) if ok else None

    def make_example(self, rng) -> dict:
        for _ in range(MAX_DRAWS):
            nums, expr, target = self._draw(rng)
            if target is not None:
                shown = " ".join(map(str, nums))
                return {"prompt": f"[{shown}]>{target}:", "answer": f"{shown}={target}", "target": expr}
        raise ValueError(f"max_target: no target in [1, {self.max_target}] in {MAX_DRAWS} draws; raise max_target")

    def extract(self, completion: str) -> str | None:
        text = completion.strip()
        return text if parse_expr(text) is not None else None

    def verify(self, extracted: str, answer: str) -> bool:
        try:
            shown, target = answer.split("=")
            numbers = sorted(int(x) for x in shown.split())
            goal = Fraction(int(target))
        except ValueError:
            return False
        parsed = parse_expr(extracted)
        return parsed is not None and parsed[0] == goal and sorted(parsed[1]) == numbers
