"""One declaration per knob: what a ``Recipe`` field means, its paper symbol, range, slider, TRL name, flag.

Every hyperparameter is declared once, as a field of ``rlnb.recipe.Recipe`` written with :func:`knob`.
Everything else is derived from that declaration: validation (``check_value``), the notebook sliders
(``rlnb.viz.explorers.base``), the ``rlnb train`` flags and their ``--help`` (``rlnb.cli``), the TRL mapping
(``rlnb.export.trl_map``), the knob table in ``docs/knobs.md`` (``knob_table_markdown``) and the tests'
list of names. Adding a knob is adding one field.

A knob that a registry entry takes (``eps_low`` for ``ppo_clip`` and ``cispo``, ``eps`` for ``grpo``) is
declared with the default :data:`UNSET`: left unset, the chosen entry runs with *its own* signature
default, so ``show_source(cispo)`` and what runs agree. Recipes write their paper's values explicitly.

>>> check_value(Knob(doc="x", range="[0, 1]", name="eps_low", kind="float"), 1.5)
Traceback (most recent call last):
...
ValueError: eps_low: expected a number in [0, 1], got 1.5
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, fields

MAX_INT = 2**31 - 1  # the largest int a knob takes: torch, JSON and every loop bound here hold it
# plain arguments' bounds (here, not in checks: the command line reads them without importing torch)
MAX_COUNT = MAX_INT  # steps, rows, prompts: the knobs' bound, more than any run needs
MAX_SEED = 2**63 - 1


def short(value, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters (a 400-digit number is not worth printing whole)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit - 5]}...({len(text)} chars)"


class _Unset:
    """The value of an entry knob a recipe leaves to the chosen registry entry's own default."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __reduce__(self):
        return "UNSET"

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


UNSET = _Unset()


@dataclass(frozen=True)
class Knob:
    """The declaration of one hyperparameter (the metadata of a ``Recipe`` field)."""

    doc: str                          # what it does, one or two sentences (also the tooltip and --help)
    symbol: str = ""                  # the paper's symbol: "ε_low", "β", "G"
    range: str | None = None          # allowed interval of a number: "[0, 1]", "(0, inf)", "(-inf, inf)"
    slider: tuple | None = None       # (min, max, step) of its widget; exponents of 10 when scale="log"
    scale: str = "linear"             # "linear" or "log"
    on: float | None = None           # value an optional knob takes when its checkbox is ticked
    off: object = None                # the value at which the knob does nothing (None: not applicable)
    trl: str | None = None            # TRL 1.16 GRPOConfig field
    no_trl: str = ""                  # why TRL has no equivalent (required when trl is None)
    choices: str | None = None        # registry (rlnb.algos attribute) whose keys are the legal values
    group: str = ""                   # the stage it belongs to: sampling, reward, advantage, loss, ...
    entry: bool = False               # default UNSET: the chosen registry entry's own default runs
    name: str = ""                    # filled from the field
    kind: str = ""                    # from the annotation: int, float, bool, str, names
    optional: bool = False            # None is a legal value (its meaning is in ``doc``)
    acts: str = ""                    # when it can act at all: "ratio" = only once the ratio can leave 1;
    #                                   an extra input's name = only when the advantage estimator reads it

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def help(self) -> str:
        """``--help`` text: symbol, doc, range and default."""
        parts = [f"{self.symbol}: " if self.symbol else "", self.doc]
        if self.range and self.range != "(-inf, inf)":
            parts.append(f" Range {self.range}.")
        if self.optional:
            parts.append(" 'none' switches it off.")
        return "".join(parts)


def knob(doc: str, default, *, symbol: str = "", range: str | None = None, slider=None, scale="linear",
         on=None, off=None, trl: str | None = None, no_trl: str = "", choices: str | None = None,
         group: str = "", acts: str = "") -> field:
    """A ``Recipe`` field with its declaration in ``metadata["knob"]``. ``default=UNSET`` marks an entry
    knob (the chosen registry entry's own default runs)."""
    if not trl and not no_trl:
        raise ValueError(f"knob {doc[:40]!r}: declare its TRL name (trl=) or why TRL has none (no_trl=)")
    spec = Knob(doc=doc, symbol=symbol, range=range, slider=slider, scale=scale, on=on, off=off, trl=trl,
                no_trl=no_trl, choices=choices, group=group, entry=default is UNSET, acts=acts)
    if isinstance(default, (list, dict, set)):
        return field(default_factory=lambda: type(default)(default), metadata={"knob": spec})
    return field(default=default, metadata={"knob": spec})


def _kind(annotation: str) -> tuple[str, bool]:
    base = str(annotation).replace("| None", "").strip()
    return {"tuple": "names"}.get(base, base), "None" in str(annotation)


def declared(cls) -> dict[str, Knob]:
    """``{name: Knob}`` for every declared field of the dataclass ``cls``, with name and kind filled."""
    out = {}
    for f in fields(cls):
        spec = f.metadata.get("knob")
        if spec is not None:
            kind, optional = _kind(f.type)
            out[f.name] = Knob(**{**{k.name: getattr(spec, k.name) for k in fields(Knob)},
                                  "name": f.name, "kind": kind, "optional": optional})
    return out


# --- validation: one value against its declaration -------------------------------------------------
def _describe(interval: str) -> str:
    lo, hi = (s.strip() for s in interval[1:-1].split(","))
    if lo == "-inf" and hi == "inf":
        return "a finite number"
    if hi == "inf":
        return f"a number {'>' if interval[0] == '(' else '>='} {lo}"
    return f"a number in {interval}"


def check_range(arg: str, value, interval: str) -> None:
    """``value`` must be a finite real number in ``interval`` ("[a, b)", "(0, inf)", ...). Ints are
    compared exactly (a 400-digit int is out of range, not an OverflowError).

    >>> check_range("temperature", 0.0, "(0, inf)")
    Traceback (most recent call last):
    ...
    ValueError: temperature: expected a number > 0, got 0.0
    """
    lo, hi = (float(s) for s in interval[1:-1].split(","))
    exact = isinstance(value, numbers.Integral)
    try:
        finite = exact or math.isfinite(value)
    except (OverflowError, TypeError):
        finite = False
    ok_lo = finite and (value >= lo if interval[0] == "[" else value > lo)
    ok_hi = finite and (value <= hi if interval[-1] == "]" else value < hi)
    if not (ok_lo and ok_hi and (not exact or abs(value) <= MAX_INT)):
        shown = value if not exact or abs(value) <= 10**12 else f"an int of {len(str(abs(value)))} digits"
        raise ValueError(f"{arg}: expected {_describe(interval)}"
                         f"{f' (at most {MAX_INT})' if exact and abs(value) > MAX_INT else ''}, got {shown}")


def check_kind(arg: str, value, kind: str, optional: bool = False) -> None:
    """``value`` must be of ``kind`` ("int", "float", "bool", "str", "names"), or None when optional."""
    if value is None and optional:
        return
    ok = {
        "int": isinstance(value, numbers.Integral) and not isinstance(value, bool),
        "float": isinstance(value, numbers.Real) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "str": isinstance(value, str),
        "names": isinstance(value, tuple) and all(isinstance(x, str) for x in value),
    }.get(kind, True)
    if not ok:
        what = {"names": "a tuple of names", "int": "an int", "bool": "True or False", "float": "a number",
                "str": "a name (str)"}.get(kind, f"a {kind}")
        raise TypeError(f"{arg}: expected {what}{' or None' if optional else ''}, got {value!r}")


def check_value(k: Knob, value) -> None:
    """Kind and range of one knob's value (UNSET is always legal for an entry knob)."""
    if value is UNSET and k.entry:
        return
    check_kind(k.name, value, k.kind, k.optional)
    if k.range is not None and value is not None and k.kind in ("int", "float"):
        check_range(k.name, value, k.range)
