"""Light and dark figures. Plotly does not follow JupyterLab's theme, so the learner picks one.

``set_theme("dark")`` changes the template of every figure built afterwards *and* of every live
explorer or dashboard figure already on screen.
"""

from __future__ import annotations

import weakref

import plotly.graph_objects as go

TEMPLATES = {"light": "plotly_white", "dark": "plotly_dark"}

# One meaning, one colour, in every figure (Okabe-Ito palette: readable with colour blindness).
COLORS = {
    "right": "#009E73",     # correct completions, A > 0
    "wrong": "#D55E00",     # wrong completions, A < 0
    "low": "#E69F00",       # clipped low (rho < 1 - eps_low, A < 0)
    "high": "#CC79A7",      # clipped high (rho > 1 + eps_high, A > 0)
    "pi": "#0072B2",        # the current policy
    "ref": "#999999",       # the reference / old policy, baselines, targets
    "accent": "#56B4E9",
}

_state = {"theme": "light"}
_live: weakref.WeakSet = weakref.WeakSet()  # LiveFigure objects to re-theme on set_theme


def set_theme(name: str) -> None:
    """Use the ``"light"`` or ``"dark"`` plotly template for all rlnb figures, live ones included."""
    if name not in TEMPLATES:
        raise ValueError(f"name: expected one of {sorted(TEMPLATES)}, got {name!r}")
    _state["theme"] = name
    for live in list(_live):
        live.retheme()


def get_theme() -> str:
    return _state["theme"]


def template() -> str:
    """The plotly template name of the current theme."""
    return TEMPLATES[_state["theme"]]


def themed(fig: go.Figure) -> go.Figure:
    """Apply the current theme (and rlnb's compact margins) to ``fig``, in place; returns it."""
    fig.update_layout(template=template(), margin=dict(l=50, r=20, t=60, b=40))
    return fig


def register_live(obj) -> None:
    """Remember a live figure holder (anything with ``retheme()``) without keeping it alive."""
    _live.add(obj)
