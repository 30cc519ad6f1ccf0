"""Registries: the one place where an algorithm's *name* turns into a function.

A registry is a dict with a ``register(name)`` decorator. Looking up an unknown name raises a
``KeyError`` that lists the known names and suggests the closest one. Names are resolved once, when a
``Trainer`` is built from a ``Recipe``; nothing downstream branches on them.

>>> R = Registry("demo")
>>> @R.register("double")
... def double(x, *, k: float = 2.0):
...     return k * x
>>> R["double"](3)
6.0
>>> R["doubel"]
Traceback (most recent call last):
...
KeyError: "unknown demo 'doubel'; known: ['double'] (did you mean 'double'?)"
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from functools import partial
from typing import Any

from rlnb.core.knobs import UNSET


class Registry(dict):
    """A named ``dict[str, Callable]`` with a ``register`` decorator and helpful lookup errors."""

    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind

    def register(self, name: str) -> Callable[[Callable], Callable]:
        def deco(fn: Callable) -> Callable:
            if name in self:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            fn.registry_name = name
            self[name] = fn
            return fn

        return deco

    def __missing__(self, name: str):
        known = sorted(self)
        close = difflib.get_close_matches(str(name), known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise KeyError(f"unknown {self.kind} {name!r}; known: {known}{hint}")

    def names(self) -> list[str]:
        return sorted(self)


# Keyword-only arguments a stage fills from the batch itself, not from the recipe: not knobs.
STRUCTURAL = frozenset({"group_size"})


def hyper_names(fn: Callable) -> list[str]:
    """The keyword-only parameters of ``fn``: its hyperparameters (tensors are positional)."""
    params = inspect.signature(fn).parameters.values()
    return [p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]


def extra_inputs(fn: Callable) -> tuple[str, ...]:
    """Names of the tensors a registry entry needs beyond its kind's fixed positional inputs.

    Losses take (logp, old_logp, adv, mask), advantages (rewards, group_size); an entry that needs more
    (DPPO's top-K log-probs, ReMax's greedy rewards, OPO's lengths) takes them as optional
    positional-or-keyword arguments after those, defaulting to None, and lists their names in
    ``fn.extra_inputs``; the stage that calls it passes them by keyword. Works on a registry entry or on
    the ``partial`` that ``bind`` returns.

    >>> def f(x, lengths=None, *, k: int = 2): ...
    >>> f.extra_inputs = ("lengths",)
    >>> extra_inputs(partial(f, k=3)), extra_inputs(print)
    (('lengths',), ())
    """
    return tuple(getattr(getattr(fn, "func", fn), "extra_inputs", ()))


def vanishes_at_zero_adv(fn: Callable) -> bool:
    """True when a policy loss declares that a token with advantage 0 adds exactly nothing to the gradient (its
    per-token loss is the advantage times something finite: every loss of the PPO and policy-gradient families).
    The Updater then runs no backward for rows whose advantage is 0 on every token (``rlnb.stages.live_rows``).
    Declared as ``fn.vanishes_at_zero_adv = True``; works on a registry entry or on ``bind``'s ``partial``.

    >>> def f(logp, old_logp, adv, mask): ...
    >>> f.vanishes_at_zero_adv = True
    >>> vanishes_at_zero_adv(partial(f)), vanishes_at_zero_adv(print)
    (True, False)
    """
    return bool(getattr(getattr(fn, "func", fn), "vanishes_at_zero_adv", False))


def knob_names(fn: Callable) -> list[str]:
    """``hyper_names`` without the structural ones: the Recipe fields that fill ``fn``."""
    return [n for n in hyper_names(getattr(fn, "func", fn)) if n not in STRUCTURAL]


def bind(fn: Callable, config: Any, **extra) -> Callable:
    """``partial(fn, **hyper)`` with each keyword-only hyperparameter read from ``config``.

    ``config`` is usually a ``Recipe``: a function's hyperparameter ``eps_high`` is filled from
    ``recipe.eps_high``. This is how recipes reach registry functions without name-based branching.
    Parameters ``config`` lacks, or leaves ``UNSET``, keep the function's own default; ``extra`` wins.
    """
    kw = {n: getattr(config, n) for n in hyper_names(fn) if getattr(config, n, UNSET) is not UNSET}
    kw.update({k: v for k, v in extra.items() if k in hyper_names(fn)})
    return partial(fn, **kw)
