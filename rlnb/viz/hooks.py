"""Stable hooks on rlnb's widgets: what a test or a script finds a widget by, never its wording.

A better label must never break a test, so each widget carries names that only change with the code:

- ``rlnb-widget rlnb-<kind>`` on a widget's outer box; ``kind`` is its class name in kebab case
  (``ClipExplorer`` -> ``clip-explorer``, ``TokenXRay`` -> ``token-x-ray``, ``Dashboard`` -> ``dashboard``);
- ``rlnb-knob rlnb-knob-<name>`` on the control of knob or parameter ``name`` (``eps_high`` -> ``rlnb-knob-eps_high``);
- ``data-rlnb-values`` on a readout (``<code class="rlnb-readout">``): its numbers by key, as JSON, exact.
"""

from __future__ import annotations

import html
import json
import math
import re


def kind(obj) -> str:
    """The kebab-case kind of a widget holder (an instance or a class).

    >>> kind("TokenXRay"), kind("ClipExplorer"), kind("GAEExplorer"), kind("LabDashboard")
    ('token-x-ray', 'clip-explorer', 'gae-explorer', 'lab-dashboard')
    """
    name = obj if isinstance(obj, str) else (obj.__name__ if isinstance(obj, type) else type(obj).__name__)
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", name).lower()


def mark_box(box, holder) -> None:
    """Name ``box`` (an ipywidgets box) by its holder's kind and, for a subclass, its base kinds too (a
    ``LabDashboard`` is also found as a ``dashboard``)."""
    box.add_class("rlnb-widget")
    for cls in type(holder).__mro__:
        if cls.__module__.startswith("rlnb.") and cls.__name__ not in ("Explorer",):
            box.add_class(f"rlnb-{kind(cls)}")


def mark_control(widget, name: str) -> None:
    """Name a control by the knob or parameter it sets."""
    widget.add_class("rlnb-knob")
    widget.add_class(f"rlnb-knob-{name}")


def values_attr(values: dict) -> str:
    """``data-rlnb-values='...'``: the numbers of ``values`` by key (NaN and infinities as null: not JSON).

    >>> print(values_attr({"step": 3, "reward": 0.25, "loss": float("nan"), "mode": "ppo"}))
    data-rlnb-values='{&quot;step&quot;: 3.0, &quot;reward&quot;: 0.25, &quot;loss&quot;: null}'
    """
    exact = {k: float(v) if math.isfinite(v) else None for k, v in values.items()
             if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return f"data-rlnb-values='{html.escape(json.dumps(exact))}'"
