"""Controls built from registry signatures, and the ``Explorer`` base class every explorer shares.

A zoo function's hyperparameters are its keyword-only arguments (``rlnb.algos.knob_names``). Each
gets one control named exactly like the argument (= the ``Recipe`` field), built from that field's
declaration (``Recipe.knobs()``: slider range and scale, symbol and doc as its tooltip). Controls are shared by name across the functions of a dropdown, the way one ``Recipe`` field
fills every function that takes it; only the current function's controls are shown.
"""

from __future__ import annotations

import contextlib
import inspect
import math
from collections.abc import Callable, Iterable

import ipywidgets as widgets

from rlnb.algos import knob_names
from rlnb.core.knobs import UNSET
from rlnb.recipe import Recipe
from rlnb.viz.backend import LiveFigure
from rlnb.viz.figures.theme import METRIC_LABELS, metric_label
from rlnb.viz.hooks import mark_box, mark_control, values_attr

STYLE = {"description_width": "initial"}


def _knob(name: str):
    """The Recipe declaration of ``name`` (slider range, scale, tooltip), or None for a foreign name."""
    return Recipe.knobs().get(name)


def doc_of(name: str) -> str:
    k = _knob(name)
    if k is None:
        return f"{name} (keyword argument)"
    return f"{k.symbol}: {k.doc}" if k.symbol else k.doc


def _params(fn: Callable, skip: Iterable[str]) -> list[inspect.Parameter]:
    sig = inspect.signature(fn).parameters
    return [sig[n] for n in knob_names(fn) if n not in skip]


def _default(p: inspect.Parameter, recipe: Recipe | None):
    """Value of hyperparameter ``p``: the recipe's field if it sets it, else the function's own default,
    else the Recipe class default (a required keyword such as ``max_new_tokens``)."""
    value = getattr(recipe, p.name, UNSET) if recipe is not None else UNSET
    if value is not UNSET:
        return value
    if p.default is not inspect.Parameter.empty:
        return p.default
    return getattr(Recipe(), p.name, 0)


def defaults(fn: Callable, *, skip: Iterable[str] = (), recipe: Recipe | None = None) -> dict:
    """``{name: value}`` of ``fn``'s hyperparameters (the recipe's values where it sets the field)."""
    return {p.name: _default(p, recipe) for p in _params(fn, skip)}


def _optional(p: inspect.Parameter) -> bool:
    return p.default is None or "None" in str(p.annotation)


def _kind(name: str, value) -> type:
    k = _knob(name)
    if isinstance(value, bool) or (k is not None and k.kind == "bool"):
        return bool
    if k is not None:
        return int if k.kind == "int" else float
    return int if isinstance(value, int) else float


def _slider(name: str, value, kind: type) -> widgets.Widget:
    k, tip = _knob(name), doc_of(name)
    if kind is bool:
        return widgets.Checkbox(value=bool(value), description=name, tooltip=tip, style=STYLE, indent=False)
    if k is not None and k.scale == "log":
        lo, hi, step = k.slider
        return widgets.FloatLogSlider(value=value, base=10, min=lo, max=hi, step=step, description=name,
                                      tooltip=tip, style=STYLE, readout_format=".0e")
    fallback = (0, max(1, 4 * abs(value)), 1 if kind is int else 0.01)
    lo, hi, step = k.slider if k is not None and k.slider else fallback
    cls = widgets.IntSlider if kind is int else widgets.FloatSlider
    w = cls(value=value, min=min(lo, value), max=max(hi, value), step=step, description=name, tooltip=tip,
            style=STYLE, continuous_update=True)
    if kind is float:
        fit_step(w, value)
    return w


def knob_control(name: str, value) -> widgets.Widget:
    """The widget of Recipe knob ``name`` showing ``value``: a dropdown for a registry name, a checkbox
    for a flag, a slider (log scale where declared) for a number. Its description is the knob's name."""
    k = _knob(name)
    if k is None:
        raise KeyError(f"name: {name!r} is not a Recipe knob")
    if k.choices and k.kind == "str":
        import rlnb.algos as algos

        return dropdown(name, sorted(getattr(algos, k.choices)), value, doc_of(name))
    w = _slider(name, value, _kind(name, value))
    mark_control(w, name)
    return w


def fit_step(w: widgets.Widget, value) -> None:
    """Give a float slider a step and readout fine enough for ``value`` (GSPO's eps is 3e-4), and its
    usual step back for ordinary values. The slider's description is its hyperparameter name."""
    if not isinstance(w, widgets.FloatSlider) or isinstance(w, widgets.FloatLogSlider):
        return
    k = _knob(w.description)
    base = k.slider[2] if k is not None and k.slider else 0.01
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
                k = _knob(p.name)
                on = k.on if k is not None and k.on is not None else 1.0
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
    w = widgets.Dropdown(options=options, value=value, description=name, tooltip=tip, style=STYLE)
    mark_control(w, name)
    return w


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
        # the readout travels with the figure (LiveFigure's caption): both always show the same setting
        self.live = LiveFigure(self._figure(), caption=self.readout)
        self.fig = self.live.fig
        self.readout.value = self._readout_html()
        for name, w in controls.items():
            mark_control(w, name)   # found by its parameter name (rlnb.viz.hooks), whatever its label says
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
            self.live.flush()  # a redraw still waiting must not cover the error later
            self.readout.value = f"<span style='color:#D55E00'>{type(err).__name__}: {err}</span>"
            return
        self.error = None
        self.live.update(new, caption=self._readout_html())

    def _readout_html(self) -> str:
        """The key numbers as a learner reads them (labels, 3 significant digits); the exact values ride along
        in ``data-rlnb-values`` (JSON, by key), where tests read them whatever the wording."""
        parts = [f"{_label(k)} = {v:.3g}" if isinstance(v, float) else f"{_label(k)} = {v}" for k, v in self.values.items()]
        return f"<code class='rlnb-readout' {values_attr(self.values)}>" + " · ".join(parts) + "</code>"

    def _figure(self):
        raise NotImplementedError

    @property
    def widget(self) -> widgets.VBox:
        """Title, controls, readout and figure in one box (built once; display it as often as you like)."""
        if self._widget is None:
            box = widgets.HBox(list(self.controls.values()), layout=widgets.Layout(flex_flow="row wrap"))
            head = widgets.HTML(f"<b>{self.title}</b>")
            self._widget = widgets.VBox([head, box, self.readout, self.live.view])
            mark_box(self._widget, self)
        return self._widget

    def _repr_mimebundle_(self, **kwargs):
        self.live.refresh_view()  # the view starts from the figure as it is now
        return self.widget._repr_mimebundle_(**kwargs)


def _label(key: str) -> str:
    """A readout key as a learner reads it: history keys (``clip_ratio/low_mean``) by their label; plain words
    ("reward": here one completion's, not the batch mean) as they are."""
    return metric_label(key) if ("/" in key or "_" in key) and key in METRIC_LABELS else key
