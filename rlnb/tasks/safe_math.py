"""A small, bounded arithmetic parser for model output: numbers, + - * /, parentheses.

It never calls ``eval``: it tokenises with a whitelist and evaluates with a recursive-descent parser
over ``fractions.Fraction`` (exact, so 6/4*2 == 3). Inputs are bounded in length, nesting depth and
number size, so hostile text such as ``__import__('os')`` or ``((((...`` is rejected in microseconds.

>>> parse_expr("25+3*7")
(Fraction(46, 1), [25, 3, 7])
>>> parse_expr("(1+2)/4")
(Fraction(3, 4), [1, 2, 4])
>>> parse_expr("__import__('os')") is None
True
"""

from __future__ import annotations

import re
from fractions import Fraction

MAX_CHARS = 64
MAX_DEPTH = 8
MAX_DIGITS = 9
_TOKEN = re.compile(r"\s*(\d+|[-+*/()])")


def _tokens(text: str) -> list[str] | None:
    if len(text) > MAX_CHARS:
        return None
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            return None if text[pos:].strip() else out
        tok = m.group(1)
        if tok.isdigit() and len(tok) > MAX_DIGITS:
            return None
        out.append(tok)
        pos = m.end()
    return out


class _Parser:
    def __init__(self, toks: list[str]):
        self.toks, self.i, self.numbers = toks, 0, []

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self):
        tok = self.peek()
        self.i += 1
        return tok

    def expr(self, depth):  # expr := term (('+'|'-') term)*
        value = self.term(depth)
        while self.peek() in ("+", "-"):
            value = value + self.term(depth) if self.take() == "+" else value - self.term(depth)
        return value

    def term(self, depth):  # term := atom (('*'|'/') atom)*
        value = self.atom(depth)
        while self.peek() in ("*", "/"):
            op, rhs = self.take(), self.atom(depth)
            if op == "/" and rhs == 0:
                raise ValueError("division by zero")
            value = value * rhs if op == "*" else value / rhs
        return value

    def atom(self, depth):  # atom := number | '(' expr ')'
        tok = self.take()
        if tok == "(":
            if depth >= MAX_DEPTH:
                raise ValueError("too deeply nested")
            value = self.expr(depth + 1)
            if self.take() != ")":
                raise ValueError("unbalanced parentheses")
            return value
        if tok is not None and tok.isdigit():
            self.numbers.append(int(tok))
            return Fraction(int(tok))
        raise ValueError(f"unexpected token {tok!r}")


def parse_expr(text: str) -> tuple[Fraction, list[int]] | None:
    """Value and the numbers used, or None if ``text`` is not a bounded arithmetic expression."""
    if not isinstance(text, str):
        return None
    toks = _tokens(text.strip())
    if not toks:
        return None
    p = _Parser(toks)
    try:
        value = p.expr(0)
    except (ValueError, ZeroDivisionError):
        return None
    if p.i != len(toks):
        return None
    return value, p.numbers
