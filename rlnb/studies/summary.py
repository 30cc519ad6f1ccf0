"""Reduce a run's history to one number, and many seeds' numbers to a mean with its spread.

A *spec* names what to reduce: ``"<reducer>:<metric>"``.

- ``metric`` is a key of ``Trainer.history`` (``entropy``, ``reward``, ``kl``,
  ``completions/mean_length_wrong`` ...) or ``eval/<key>`` for the held-out evaluations a study ran
  (``eval/greedy/pass@1``, ``eval/sampled/pass@8``, ``eval/kl_to_init`` ...).
- ``reducer`` is one of ``start``, ``final``, ``change`` (final - start), ``mean``, ``min``, ``max``.
  On the history, ``start`` and ``final`` average the first / last ``window`` steps (single steps are
  noisy: 128 samples); on evaluations they are the first (step 0) and last evaluation.

Steps where a metric is missing or None (e.g. the length of wrong answers in a batch with none) are
skipped. Spread over seeds uses the sample standard deviation (divide by n - 1; 0 for one seed).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

REDUCERS = ("start", "final", "change", "mean", "min", "max")


@dataclass(frozen=True)
class Stat:
    """One number per seed, and their mean, sample std, min and max.

    >>> s = Stat((1.0, 2.0, 4.0))
    >>> s.mean, round(s.std, 4), s.min, s.max
    (2.3333333333333335, 1.5275, 1.0, 4.0)
    >>> f"{s:.2f}", f"{Stat((0.5, 0.75)):.2f}"      # whole numbers without decimals
    ('2.33 ± 1.53 [1, 4]', '0.62 ± 0.18 [0.50, 0.75]')
    >>> f"{Stat((30.0, 30.0)):.3f}", f"{Stat((float('nan'),)):.3f}"   # every seed agrees; never measured
    ('30', '-')
    """

    values: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        return sum(self.values) / self.n if self.n else math.nan

    @property
    def std(self) -> float:
        if self.n < 2:
            return 0.0 if self.n else math.nan
        mu = self.mean
        return math.sqrt(sum((v - mu) ** 2 for v in self.values) / (self.n - 1))

    @property
    def min(self) -> float:
        return min(self.values) if self.n else math.nan

    @property
    def max(self) -> float:
        return max(self.values) if self.n else math.nan

    def all_above(self, x: float) -> bool:
        """True when every seed's value is above ``x`` (e.g. a paired difference above 0)."""
        return self.n > 0 and all(v > x for v in self.values)

    def all_below(self, x: float) -> bool:
        return self.n > 0 and all(v < x for v in self.values)

    def ci95(self) -> tuple[float, float]:
        """Two-sided 95 % Student-t interval of the mean over seeds (NaN with fewer than 2 seeds).

        >>> [round(v, 3) for v in Stat((1.0, 2.0, 4.0)).ci95()]
        [-1.462, 6.128]
        """
        if self.n < 2:
            return (math.nan, math.nan)
        half = t_quantile_975(self.n - 1) * self.std / math.sqrt(self.n)
        return (self.mean - half, self.mean + half)

    def __format__(self, fmt: str) -> str:
        """``mean ± std [min, max]``; one number when every seed agrees, whole numbers without decimals, and
        "-" when no seed measured it (NaN)."""
        fmt = fmt or ".3f"
        vals = [v for v in self.values if v == v]
        if not vals:
            return "-"
        whole = all(float(v).is_integer() for v in vals)
        one = (lambda v: f"{v:.0f}") if whole else (lambda v: f"{v:{fmt}}")  # noqa: E731
        if min(vals) == max(vals):
            return one(vals[0])
        return f"{self.mean:{fmt}} ± {self.std:{fmt}} [{one(self.min)}, {one(self.max)}]"

    def __str__(self) -> str:
        return format(self)


_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086)


def t_quantile_975(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (table to 20, then 1.96 + 2.4 / df)."""
    if df < 1:
        raise ValueError(f"df: expected >= 1, got {df!r}")
    return _T975[df - 1] if df <= len(_T975) else 1.96 + 2.4 / df


def parse_spec(spec: str) -> tuple[str, str]:
    """``"final:entropy"`` -> ``("final", "entropy")``.

    >>> parse_spec("change:eval/greedy/pass@1")
    ('change', 'eval/greedy/pass@1')
    """
    if not isinstance(spec, str) or ":" not in spec:
        raise ValueError(f"spec: expected '<reducer>:<metric>' with reducer in {REDUCERS}, got {spec!r}")
    reducer, metric = spec.split(":", 1)
    if reducer not in REDUCERS:
        raise ValueError(f"spec: unknown reducer {reducer!r} in {spec!r}; known: {REDUCERS}")
    return reducer, metric


REDUCER_WORDS = {"start": "at the start", "final": "at the end", "change": "change over the run",
                 "mean": "run mean", "min": "lowest", "max": "highest"}


def spec_label(spec: str) -> str:
    """A table header a learner reads: ``"mean:frac_reward_zero_std"`` -> "groups with no signal (share), run mean".

    >>> spec_label("change:eval/greedy/pass@1"), spec_label("final:eval/sampled/pass@8")
    ('held-out pass@1 (greedy), change over the run', 'held-out pass@8 (sampled), at the end')
    """
    from rlnb.viz.figures.theme import metric_label

    reducer, metric = parse_spec(spec)
    held_out = re.fullmatch(r"eval/(greedy|sampled)/pass@(\d+)", metric)  # the studies' evaluations
    label = f"held-out pass@{held_out[2]} ({held_out[1]})" if held_out else metric_label(metric)
    return f"{label}, {REDUCER_WORDS[reducer]}"


def series(history: list[dict], evals: list[dict], metric: str) -> list[float]:
    """The metric's values over a run, skipping steps where it is missing or None."""
    rows, key = (evals, metric[5:]) if metric.startswith("eval/") else (history, metric)
    return [float(r[key]) for r in rows if r.get(key) is not None]


def reduce(values: list[float], reducer: str, *, window: int = 1) -> float:
    """One number from a series; ``start``/``final`` average the first/last ``window`` values.

    >>> reduce([1.0, 2.0, 3.0, 6.0], "change", window=2)
    3.0
    >>> reduce([1.0, 2.0, 3.0, 6.0], "max")
    6.0
    """
    if not values:
        return math.nan
    w = max(1, min(int(window), len(values)))
    if reducer == "start":
        return sum(values[:w]) / w
    if reducer == "final":
        return sum(values[-w:]) / w
    if reducer == "change":
        return sum(values[-w:]) / w - sum(values[:w]) / w
    if reducer == "mean":
        return sum(values) / len(values)
    if reducer == "min":
        return min(values)
    if reducer == "max":
        return max(values)
    raise ValueError(f"reducer: expected one of {REDUCERS}, got {reducer!r}")


def reduce_run(history: list[dict], evals: list[dict], spec: str, *, window: int = 1) -> float:
    """Apply a spec to one run. Evaluations are reduced with window 1 (each is already an average)."""
    reducer, metric = parse_spec(spec)
    w = 1 if metric.startswith("eval/") else window
    return reduce(series(history, evals, metric), reducer, window=w)


class Table:
    """Per arm and spec, a ``Stat`` over seeds. ``table[arm, spec]`` gives the ``Stat``; printing (or
    displaying in Jupyter) gives a markdown / HTML table of mean ± std [min, max]."""

    def __init__(self, arms: list[str], specs: list[str], stats: dict[tuple[str, str], Stat], digits: int = 3):
        self.arms, self.specs, self.stats, self.digits = list(arms), list(specs), dict(stats), digits

    def __getitem__(self, key: tuple[str, str]) -> Stat:
        if key not in self.stats:
            raise KeyError(f"table: no entry {key!r}; arms {self.arms}, specs {self.specs}")
        return self.stats[key]

    def rows(self) -> list[dict]:
        """One dict per (arm, spec): mean, std, min, max, values."""
        return [{"arm": a, "spec": s, "mean": st.mean, "std": st.std, "min": st.min, "max": st.max,
                 "values": list(st.values)} for (a, s), st in self.stats.items()]

    def to_markdown(self) -> str:
        fmt = f".{self.digits}f"
        lines = ["| arm | " + " | ".join(self.specs) + " |", "|---" * (len(self.specs) + 1) + "|"]
        for a in self.arms:
            lines.append(f"| {a} | " + " | ".join(format(self.stats[a, s], fmt) for s in self.specs) + " |")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        fmt = f".{self.digits}f"
        head = "".join(f"<th title='{s}'>{spec_label(s)}</th>" for s in self.specs)  # the key stays as a tooltip
        body = "".join("<tr><td>" + a + "</td>" + "".join(f"<td>{self.stats[a, s]:{fmt}}</td>" for s in self.specs)
                       + "</tr>" for a in self.arms)
        return f"<table><tr><th>arm</th>{head}</tr>{body}</table>"

    def __str__(self) -> str:
        return self.to_markdown()

    __repr__ = __str__
