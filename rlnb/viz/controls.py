"""Controls built from registry signatures, and the ``Explorer`` base class every explorer shares.

A zoo function's hyperparameters are its keyword-only arguments (``rlnb.algos.hyper_names``). Each
gets one control named exactly like the argument (= the ``Recipe`` field), with the field's doc as its
tooltip. Controls are shared by name across the functions of a dropdown, the way one ``Recipe`` field
fills every function that takes it; only the current function's controls are shown.
"""

from __future__ import annotations

import contextlib
import inspect
import math
from collections.abc import Callable, Iterable

import ipywidgets as widgets

from rlnb.algos import hyper_names
from rlnb.recipe import Recipe
from rlnb.viz.backend import LiveFigure

# Slider (min, max, step) per hyperparameter *name*; names are unique across the zoo. "log" marks a
# FloatLogSlider over powers of ten. ``on`` is the value an optional (default None) argument takes
# when its checkbox is ticked. Tooltips come from the Recipe field's doc; ``doc`` here is the fallback
# for a name that is not (yet) a Recipe field. Unknown names get a generic slider around their default.
SPECS: dict[str, dict] = {
    "eps_low": dict(range=(0.0, 1.0, 0.01)),
    "eps_high": dict(range=(0.0, 1.0, 0.01)),
    "dual_clip_c": dict(range=(1.05, 10.0, 0.05), on=3.0),
    "cispo_cap": dict(range=(0.5, 10.0, 0.1), on=5.0),
    "dppo_delta": dict(range=(0.0, 0.5, 0.01)),
    "dppo_cap": dict(range=(1.0, 20.0, 0.5)),
    "tau_pos": dict(range=(0.1, 5.0, 0.05)),
    "tau_neg": dict(range=(0.1, 5.0, 0.05)),
    "eps": dict(range=(-9, -1, 0.5), log=True),
    "max_new_tokens": dict(range=(1, 128, 1)),
}

STYLE = {"description_width": "initial"}


def doc_of(name: str) -> str:
    return Recipe.field_docs().get(name) or SPECS.get(name, {}).get("doc", f"{name} (keyword argument)")


def _params(fn: Callable, skip: Iterable[str]) -> list[inspect.Parameter]:
    sig = inspect.signature(fn).parameters
    return [sig[n] for n in hyper_names(fn) if n not in skip]


def _default(p: inspect.Parameter, recipe: Recipe | None):
    """Value of hyperparameter ``p``: the recipe's field if it has one, else the function's default,
    else the Recipe class default (a required keyword such as ``max_new_tokens``)."""
    if recipe is not None and hasattr(recipe, p.name):
        return getattr(recipe, p.name)
    if p.default is not inspect.Parameter.empty:
        return p.default
    return getattr(Recipe(), p.name, SPECS.get(p.name, {}).get("range", (0,))[0])


def defaults(fn: Callable, *, skip: Iterable[str] = (), recipe: Recipe | None = None) -> dict:
    """``{name: value}`` of ``fn``'s hyperparameters (the recipe's values where it has the field)."""
    return {p.name: _default(p, recipe) for p in _params(fn, skip)}


def _optional(p: inspect.Parameter) -> bool:
    return p.default is None or "None" in str(p.annotation)


def _kind(name: str, value) -> type:
    spec = SPECS.get(name, {})
    if isinstance(value, bool):
        return bool
    if isinstance(value, int) and not spec.get("log") and isinstance(spec.get("range", (0,))[0], int):
        return int
    return float


def _slider(name: str, value, kind: type) -> widgets.Widget:
    spec = SPECS.get(name, {})
    tip = doc_of(name)
    if kind is bool:
        return widgets.Checkbox(value=bool(value), description=name, tooltip=tip, style=STYLE, indent=False)
    if spec.get("log"):
        lo, hi, step = spec["range"]
        return widgets.FloatLogSlider(value=value, base=10, min=lo, max=hi, step=step, description=name,
                                      tooltip=tip, style=STYLE, readout_format=".0e")
    lo, hi, step = spec.get("range", (0, max(1, 4 * abs(value)), 1 if kind is int else 0.01))
    cls = widgets.IntSlider if kind is int else widgets.FloatSlider
    w = cls(value=value, min=lo, max=max(hi, value), step=step, description=name, tooltip=tip, style=STYLE,
            continuous_update=True)
    if kind is float:
        fit_step(w, value)
    return w


def fit_step(w: widgets.Widget, value) -> None:
    """Give a float slider a step and readout fine enough for ``value`` (GSPO's eps is 3e-4), and its
    usual step back for ordinary values. The slider's description is its hyperparameter name."""
    if not isinstance(w, widgets.FloatSlider) or isinstance(w, widgets.FloatLogSlider):
        return
    base = SPECS.get(w.description, {}).get("range", (0, 0, 0.01))[2]
    if value and abs(value) < 10 * base:
        digits = max(2, -math.floor(math.log10(abs(value))) + 1)
        w.step = min(base, 10.0 ** -digits)
    else:
        digits = max(2, -math.floor(math.log10(base)))
        w.step = base
    w.readout_format = f".{digits}f"


def hyper_controls(fns: Iterable[Callable], *, skip: Iterable[str] = (), recipe: Recipe | None = None) -> dict:
    """One control per hyperparameter name over all ``fns``; an optional one (default None) gets a
    checkbox ``<name>_on`` beside its slider."""
    out: dict[str, widgets.Widget] = {}
    for fn in fns:
        for p in _params(fn, skip):
            if p.name in out:
                continue
            value = _default(p, recipe)
            if _optional(p):
                on = SPECS.get(p.name, {}).get("on", 1.0)
                out[p.name + "_on"] = widgets.Checkbox(value=value is not None, description=f"use {p.name}",
                                                       tooltip=doc_of(p.name), style=STYLE, indent=False)
                value = on if value is None else value
            out[p.name] = _slider(p.name, value, _kind(p.name, value))
    return out


def hyper_kwargs(fn: Callable, controls: dict, *, skip: Iterable[str] = ()) -> dict:
    """The keyword arguments for ``fn`` read from ``controls`` (None where an optional one is off)."""
    kw = {}
    for p in _params(fn, skip):
        on = controls.get(p.name + "_on")
        kw[p.name] = None if on is not None and not on.value else controls[p.name].value
    return kw


def set_hypers(fn: Callable, controls: dict, managed: Iterable[str], *, skip: Iterable[str] = (),
               recipe: Recipe | None = None) -> None:
    """Show only ``fn``'s controls among the ``managed`` names and set them to its defaults (or the
    recipe's values)."""
    mine = set()
    for p in _params(fn, skip):
        value = _default(p, recipe)
        mine.add(p.name)
        if p.name + "_on" in controls:
            mine.add(p.name + "_on")
            controls[p.name + "_on"].value = value is not None
        w = controls[p.name]
        if value is not None and not isinstance(w, (widgets.Checkbox, widgets.FloatLogSlider)):
            w.max, w.min = max(w.max, value), min(w.min, value)  # a slider silently clamps what it cannot show
            fit_step(w, value)
        if value is not None:
            w.value = value
    for name in managed:
        controls[name].layout.display = "" if name in mine else "none"


def dropdown(name: str, options: list[str], value: str, tip: str) -> widgets.Dropdown:
    if value not in options:
        raise ValueError(f"{name}: expected one of {options}, got {value!r}")
    return widgets.Dropdown(options=options, value=value, description=name, tooltip=tip, style=STYLE)


class Explorer:
    """Controls + a live figure + a readout line. Subclasses implement ``_figure()``, which reads the
    controls, fills ``self.values`` (the key numbers, also shown in the readout) and returns a new
    figure with the same traces every time.

    Each instance owns its widgets and observes each of them once, in ``_start``; making a second
    explorer never adds callbacks to the first. ``n_updates`` counts redraws.
    """

    title = "explorer"

    def _start(self, controls: dict[str, widgets.Widget], *, handlers: dict | None = None) -> None:
        """Build the figure and observe each control once (``handlers``: name -> own callback)."""
        self.controls = controls
        self.values: dict[str, float] = {}
        self.error: str | None = None
        self.n_updates = 0
        self._held = 0
        self.readout = widgets.HTML(layout=widgets.Layout(min_height="1.5em"))
        self.live = LiveFigure(self._figure())
        self.fig = self.live.fig
        self._show_readout()
        for name, w in controls.items():
            w.observe((handlers or {}).get(name, self._on_change), names="value")
        self._widget = None

    @contextlib.contextmanager
    def hold(self):
        """Set several controls at once with one redraw at the end (re-entrant: the outermost redraws)."""
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1
        if not self._held:
            self.update()

    def _on_change(self, change) -> None:
        if not self._held:
            self.update()

    def update(self) -> None:
        """Recompute from the controls and redraw. A zoo function's ValueError is shown, not raised."""
        self.n_updates += 1
        try:
            new = self._figure()
        except ValueError as err:
            self.error = str(err)
            self.readout.value = f"<span style='color:#D55E00'>{type(err).__name__}: {err}</span>"
            return
        self.error = None
        self.live.update(new)
        self._show_readout()

    def _show_readout(self) -> None:
        parts = [f"{k} = {v:.4f}" if isinstance(v, float) else f"{k} = {v}" for k, v in self.values.items()]
        self.readout.value = "<code class='rlnb-readout'>" + " · ".join(parts) + "</code>"

    def _figure(self):
        raise NotImplementedError

    @property
    def widget(self) -> widgets.VBox:
        """Title, controls, readout and figure in one box (built once; display it as often as you like)."""
        if self._widget is None:
            box = widgets.HBox(list(self.controls.values()), layout=widgets.Layout(flex_flow="row wrap"))
            head = widgets.HTML(f"<b>{self.title}</b>")
            self._widget = widgets.VBox([head, box, self.readout, self.live.view])
        return self._widget

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)
