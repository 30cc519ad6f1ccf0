"""Countdown: reach a target from given numbers with + - * / (each number used exactly once).

Prompt ``[3 7 25]>46:``, a correct completion ``25+3*7``. The answer string carries the numbers and the
target (``3 7 25=46``). Completions are parsed by ``rlnb.tasks.safe_math`` (exact fractions, bounded
size and depth), never evaluated as code.
"""

from __future__ import annotations

from fractions import Fraction

from rlnb.tasks.base import Task, register
from rlnb.tasks.safe_math import parse_expr


@register("countdown")
class Countdown(Task):
    """``n_numbers`` numbers in ``[1, max_number]``; targets are reachable by construction."""

    description = "reach the target from the given numbers with + - * /, each number once"

    def __init__(self, n_numbers: int = 3, max_number: int = 20, max_target: int = 200):
        if not 2 <= n_numbers <= 6:
            raise ValueError(f"n_numbers: expected an int in [2, 6], got {n_numbers!r}")
        self.n_numbers, self.max_number, self.max_target = n_numbers, max_number, max_target

    def make_example(self, rng) -> dict:
        while True:
            nums = [rng.randint(1, self.max_number) for _ in range(self.n_numbers)]
            order = rng.sample(nums, len(nums))
            expr = str(order[0]) + "".join(rng.choice("+-*") + str(x) for x in order[1:])
            value, _ = parse_expr(expr)
            if value.denominator == 1 and 1 <= value <= self.max_target:
                break
        shown = " ".join(map(str, nums))
        target = int(value)
        return {"prompt": f"[{shown}]>{target}:", "answer": f"{shown}={target}", "target": expr}

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
