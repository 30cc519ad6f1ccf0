"""What every exercise checker shares: run the learner's function on cases against the library's reference,
and name the likely mistake when an answer matches a known wrong one (``with_hints``)."""

from __future__ import annotations

import torch


class Verdict:
    """A checker's answer: true when every case matched. It shows nothing in a notebook (the checker has already
    printed its message and hint), so an exercise cell ends with that message, not a bare ``False``.

    >>> bool(Verdict(False)), repr(Verdict(True))
    (False, 'passed')
    """

    __slots__ = ("ok",)

    def __init__(self, ok: bool):
        self.ok = bool(ok)

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        return "passed" if self.ok else "not yet"

    def _ipython_display_(self) -> None:  # IPython shows this instead of the repr: nothing to add
        pass


def compare(name: str, fn, ref, cases: list[tuple], atol: float = 1e-5, strict: bool = True) -> Verdict:
    try:
        _run_cases(name, fn, ref, cases, atol)
    except AssertionError as e:
        if strict:
            raise
        print(f"Not yet. {e}")
        return Verdict(False)
    print(f"{name}: all {len(cases)} cases match the library. Well done!")
    return Verdict(True)


def _run_cases(name: str, fn, ref, cases: list[tuple], atol: float) -> None:
    for i, args in enumerate(cases):
        expected = ref(*args)
        try:
            got = fn(*args)
        except Exception as e:  # show the learner their own error, with the input that caused it
            raise AssertionError(f"{name}: your function raised {type(e).__name__}: {e} on case {i}: {args}") from e
        if not _same(got, expected, atol):
            raise AssertionError(f"{name}: case {i} differs.\n  input:    {_show(args)}\n  yours:    {_show(got)}\n"
                                 f"  expected: {_show(expected)}")


def _show(x) -> str:
    """A value for a learner to read: tensors and floats at 4 significant digits (``tensor([1001, -998.6])``)."""
    if isinstance(x, torch.Tensor):
        return f"tensor({_show(x.tolist())})"
    if isinstance(x, float):
        return f"{x:.4g}"
    if isinstance(x, (list, tuple)):
        inner = ", ".join(_show(v) for v in x)
        return f"[{inner}]" if isinstance(x, list) else f"({inner}{',' if len(x) == 1 else ''})"
    return repr(x)


def _same(got, expected, atol: float) -> bool:
    """Strings and None (answer extractors) must be equal; numbers and tensors close."""
    if expected is None or isinstance(expected, str):
        return type(got) is type(expected) and got == expected
    try:
        got_t, exp_t = torch.as_tensor(got, dtype=torch.float64), torch.as_tensor(expected, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        return False
    return got_t.shape == exp_t.shape and torch.allclose(got_t, exp_t, atol=atol, rtol=1e-4, equal_nan=True)


def with_hints(name: str, fn, ref, cases: list[tuple], hints: list[tuple], strict: bool) -> Verdict:
    """``compare``, and on a mismatch: for each ``(mistake_fn, hint)`` that ``fn`` agrees with on every
    case, print the hint (the common mistakes of the exercise)."""
    try:
        _run_cases(name, fn, ref, cases, 1e-6)
    except AssertionError as e:
        for mistake, hint in hints:
            try:
                _run_cases(name, fn, mistake, cases, 1e-6)
            except AssertionError:
                continue
            print(f"Hint: {hint}")
        if strict:
            raise
        print(f"Not yet. {e}")
        return Verdict(False)
    print(f"{name}: all {len(cases)} cases match. Well done!")
    return Verdict(True)
