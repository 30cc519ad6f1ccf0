"""Numbers as a learner reads them: dicts of metrics shown at 3 significant digits, full precision kept."""

from __future__ import annotations


def short(x, digits: int = 3) -> str:
    """A number at ``digits`` significant digits (ints and non-numbers as they are).

    >>> short(2.7939677238464355e-09), short(0.14394617080688477), short(60.0), short(7), short("grpo")
    ('2.79e-09', '0.144', '60', '7', "'grpo'")
    """
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return repr(x)
    if isinstance(x, int) or float(x).is_integer():
        return str(int(x))
    return f"{x:.{digits}g}"


class Readable(dict):
    """A dict of metrics whose display rounds to 3 significant digits; the values themselves stay exact.

    >>> m = Readable({"loss": 2.7939677238464355e-09, "num_updates": 1, "entropy": 0.14394617080688477})
    >>> m
    {'loss': 2.79e-09, 'num_updates': 1, 'entropy': 0.144}
    >>> m["entropy"]
    0.14394617080688477
    """

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k!r}: {short(v)}" for k, v in self.items()) + "}"

    def _repr_pretty_(self, p, cycle) -> None:  # IPython would otherwise print a dict subclass as a dict
        p.text(repr(self))
