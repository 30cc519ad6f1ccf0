"""Multi-digit addition, optionally with column-by-column scratch work before the answer.

Prompt ``750+839=``. Two correct completion styles, so completion length varies:
  direct   ``1589``
  scratch  ``0+9=9;5+3=8;7+8=15>1589``  (column sums from the ones up, then ``>`` and the answer)
The reward is 1 when the number after the last ``>`` (or the whole completion, if it has no ``>``)
equals a + b. The warm start writes scratch work half of the time; RL discovers that scratch work pays.
"""

from __future__ import annotations

import re

from rlnb.core.checks import check_int, check_number
from rlnb.tasks.base import Task, register

_DIRECT = re.compile(r"^\d{1,32}$")
_SCRATCH = re.compile(r"^(?:\d{1,3}\+\d{1,3}=\d{1,4};){0,31}\d{1,3}\+\d{1,3}=\d{1,4}>(\d{1,32})$")


def scratch_work(a: int, b: int) -> str:
    """The column sums of a + b from the ones digit up, e.g. ``scratch_work(750, 839)`` -> ``0+9=9;5+3=8;7+8=15``."""
    da, db = str(a)[::-1], str(b)[::-1]
    cols = []
    for i in range(max(len(da), len(db))):
        x = int(da[i]) if i < len(da) else 0
        y = int(db[i]) if i < len(db) else 0
        cols.append(f"{x}+{y}={x + y}")
    return ";".join(cols)


@register("add")
class Addition(Task):
    """``digits``-digit addition; ``p_scratch`` is the share of warm-start targets with scratch work."""

    description = "3-digit addition, answer optionally preceded by column scratch work"

    def __init__(self, digits: int = 3, p_scratch: float = 0.5):
        self.digits = check_int("digits", digits, low=1, high=9)
        self.p_scratch = check_number("p_scratch", p_scratch, low=0.0, high=1.0)

    def make_example(self, rng) -> dict:
        lo, hi = 10 ** (self.digits - 1), 10**self.digits - 1
        a, b = rng.randint(lo, hi), rng.randint(lo, hi)
        answer = str(a + b)
        target = f"{scratch_work(a, b)}>{answer}" if rng.random() < self.p_scratch else answer
        return {"prompt": f"{a}+{b}=", "answer": answer, "target": target}

    def extract(self, completion: str) -> str | None:
        text = completion.strip()
        tail = text.rsplit(">", 1)[-1]
        if not _DIRECT.match(tail):
            return None
        return str(int(tail))

    def is_well_formed(self, completion: str) -> bool:
        text = completion.strip()
        return bool(_DIRECT.match(text) or _SCRATCH.match(text))

    def verify(self, extracted: str, answer: str) -> bool:
        return extracted == answer.strip()
