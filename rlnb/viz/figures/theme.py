"""Light and dark figures: the template a figure is built in, and the page style that repaints it when JupyterLab's
theme changes (``page_style``).

``set_theme("dark")`` changes the template of every figure built afterwards *and* of every live
explorer or dashboard figure already on screen. Until it is called, figures follow ``RLNB_THEME`` or the theme
saved in JupyterLab's settings (``detect_theme``).
"""

from __future__ import annotations

import math
import os
import re
import weakref
from pathlib import Path

import plotly.graph_objects as go

from rlnb.viz.figures import page_style

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

# One colour per recipe across the curriculum (a recipe keeps its colour in every notebook's figures).
RECIPE_COLORS = {
    "reinforce": "#999999", "ppo": "#A0522D", "grpo": "#0072B2", "rloo": "#E69F00", "dr_grpo": "#188810",
    "dapo": "#D55E00", "cispo": "#CC79A7", "gspo": "#009E73", "maxrl": "#9A8700", "dppo": "#F84878",
    "scalerl": "#506030", "gpg": "#5858C8", "gdpo": "#E858D8",
}
# Every two of them are ``distinct`` (tests/test_viz_figure_defects.py): grpo and dr_grpo were two blues, dppo,
# gdpo and cispo three pinks, gspo, scalerl and gpg three greens.
_EXTRA = ("#6677CC", "#997700", "#AA3377", "#2F8F8F")  # for names outside the table: never a named recipe's
# Every colour above reads on a white figure and on JupyterLab's dark background (contrast >= 2.2 on both,
# tests/test_viz_figures.py): Okabe-Ito's yellow and wine did not (1.3 on white, 2.2 on dark).


def recipe_color(name: str) -> str:
    """The recipe's colour in every figure; names outside the table (your own recipes, ablation arms)
    get a stable colour from a second palette."""
    import zlib

    return RECIPE_COLORS.get(name) or _EXTRA[zlib.crc32(str(name).encode()) % len(_EXTRA)]


def _lab(color: str) -> tuple[float, float, float]:
    """CIELAB (D65) of a ``#rrggbb`` colour: distances there follow what the eye tells apart."""
    c = [int(color.lstrip("#")[i:i + 2], 16) / 255 for i in (0, 2, 4)]
    r, g, b = (x / 12.92 if x <= 0.04045 else ((x + 0.055) / 1.055) ** 2.4 for x in c)
    xyz = ((0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047, 0.2126 * r + 0.7152 * g + 0.0722 * b,
           (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883)
    fx, fy, fz = (t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116 for t in xyz)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def distinct(a: str, b: str) -> bool:
    """Whether two colours read as two runs: at least ``MIN_DISTANCE`` apart in CIELAB (16's grpo #0072B2 and
    #56B4E9, the "two blues" of issue 44, are 26 apart).

    >>> distinct("#0072B2", "#56B4E9"), distinct("#0072B2", "#E69F00"), distinct("#999999", "#A0A0A0")
    (False, True, False)
    """
    return math.dist(_lab(a), _lab(b)) >= MIN_DISTANCE


MIN_DISTANCE = 28.0


def run_colors(names, given: dict | None = None) -> dict[str, str]:
    """One colour per run of a figure, each distinct from the runs before it (``distinct``): ``given[name]``, else
    the recipe's (``recipe_color``); one that would not stand apart takes the first colour of a qualitative palette
    (``_EXTRA``, then the recipes' colours) that does, readable on light and dark like every colour here. The same
    colour given for several runs is kept.

    >>> run_colors(["grpo", "mine"], {"mine": "#56B4E9"})
    {'grpo': '#0072B2', 'mine': '#997700'}
    """
    out: dict[str, str] = {}
    for name in names:
        want = (given or {}).get(name) or recipe_color(name)
        if want in out.values() and want == (given or {}).get(name):
            out[name] = want            # one colour given for several runs on purpose (12: every pass@k is maxrl's)
            continue
        palette = (want, *_EXTRA, *RECIPE_COLORS.values())
        out[name] = next((c for c in palette if all(distinct(c, u) for u in out.values())),
                         max(palette, key=lambda c: min((math.dist(_lab(c), _lab(u)) for u in out.values()),
                                                        default=0.0)))
    return out


# Human labels for the metrics in Trainer.history (TRL's names), for legends and axis titles.
METRIC_LABELS = {
    "reward": "mean reward", "accuracy": "share correct (sampled)", "eval/pass@1": "held-out pass@1 (greedy)",
    "entropy": "entropy (nats per token)", "kl": "KL to reference (per token)",
    "clip_ratio/low_mean": "clipped low (share of tokens)", "clip_ratio/high_mean": "clipped high (share of tokens)",
    "clip_ratio/region_mean": "clipped (share of tokens)",
    "completions/mean_length": "mean length (tokens)", "completions/mean_length_correct": "length, right answers",
    "completions/mean_length_wrong": "length, wrong answers", "frac_reward_zero_std": "groups with no signal (share)",
    "grad_norm": "gradient norm", "rewards/loophole/mean": "paid via the loophole (share)",
    "rewards/correct/mean": "truly correct (share)",
    "rewards/format/mean": "paid for the format (share)", "groups_with_signal": "groups with signal",
    "eval/kl_to_init": "exact KL to the starting model (nats per token, last batch)",
    "gen_rounds": "sampling rounds", "frac_reward_zero_std_sampled": "sampled groups with no signal (share)", "loss": "loss", "pg_loss": "policy loss", "learning_rate": "learning rate",
    "sampling/sampling_logp_difference/mean": "|log pi_old - log mu| (mean per token)",
    "sampling/sampling_logp_difference/max": "|log pi_old - log mu| (max)",
    "sampling/importance_sampling_ratio/min": "rollout IS ratio (min)",
    "sampling/importance_sampling_ratio/mean": "rollout IS ratio (mean)",
    "sampling/importance_sampling_ratio/max": "rollout IS ratio (max)",
    "rollout_corr/rejected_fraction": "rejected by the rollout correction (share of tokens)",
    "rollout_corr/gated_fraction": "gated by the off-policy mask (share of tokens)",
}


# The unit of each metric, for axis titles (a panel's metrics share it, or the panel names them).
METRIC_UNITS = {
    "reward": "reward", "accuracy": "share", "eval/pass@1": "share", "entropy": "nats per token",
    "kl": "nats per token", "clip_ratio/low_mean": "share of tokens", "clip_ratio/high_mean": "share of tokens",
    "clip_ratio/region_mean": "share of tokens", "completions/mean_length": "tokens",
    "completions/mean_length_correct": "tokens", "completions/mean_length_wrong": "tokens",
    "frac_reward_zero_std": "share of groups", "rewards/loophole/mean": "share", "rewards/correct/mean": "share",
    "rewards/format/mean": "share",
}

# Metrics that cannot be negative: their axis starts at 0 (a flat zero line is drawn at the bottom, not mid -1..1).
NONNEGATIVE = {"accuracy", "eval/pass@1", "entropy", "clip_ratio/low_mean", "clip_ratio/high_mean",
               "clip_ratio/region_mean", "completions/mean_length", "completions/mean_length_correct",
               "completions/mean_length_wrong", "frac_reward_zero_std", "sampling/sampling_logp_difference/mean",
               "sampling/importance_sampling_ratio/min"}


def metric_label(key: str) -> str:
    """A human label for a history key (``hp/beta`` -> "beta (knob)", ``rewards/<part>/mean`` -> "reward part
    '<part>' (mean)"; other unknown keys are returned as is)."""
    if key.startswith("hp/"):
        return f"{key[3:]} (knob)"
    parts = key.split("/")
    if key not in METRIC_LABELS and len(parts) == 3 and parts[0] == "rewards" and parts[2] == "mean":
        return f"reward part '{parts[1]}' (mean)"
    return METRIC_LABELS.get(key, key)


# Two metrics that are one curve on a task, named once (the dashboard draws the line once, rlnb.viz.figures.train).
SAME_LINE_LABELS = {("reward", "accuracy"): "mean reward = share correct (0/1 rewards)"}


def same_line_label(a: str, b: str) -> str:
    """The name of one curve that is both metric ``a`` and ``b``: why they coincide where it is known.

    >>> same_line_label("reward", "accuracy")
    'mean reward = share correct (0/1 rewards)'
    >>> same_line_label("clip_ratio/low_mean", "clip_ratio/high_mean")
    'clipped low = clipped high (share of tokens)'
    """
    known = SAME_LINE_LABELS.get((a, b)) or SAME_LINE_LABELS.get((b, a))
    if known:
        return known
    la, lb = metric_label(a), metric_label(b)
    unit = la[la.rfind(" ("):] if la.endswith(")") and " (" in la else ""
    return f"{la.removesuffix(unit)} = {lb}" if unit and lb.endswith(unit) else f"{la} = {lb}"  # the unit once


def key_html(items, symbol: str = "━━") -> str:
    """A figure's key written in text, for a panel's title: each ``(label, colour)`` in its colour, after ``symbol``
    (a line; "■" for bars), small. Legends hold the runs; this names the curves of one panel.

    >>> key_html([("reward", "#999999")])
    "<span style='font-size:11px'><span style='color:#999999'>━━ reward</span></span>"
    """
    parts = " · ".join(f"<span style='color:{c}'>{symbol} {label}</span>" for label, c in items)
    return f"<span style='font-size:11px'>{parts}</span>"


def axis_title(keys) -> str:
    """The y axis title of a panel showing ``keys``: their shared unit, else their labels."""
    units = {METRIC_UNITS.get(k) for k in keys}
    if len(units) == 1 and None not in units:
        return units.pop()
    return " / ".join(dict.fromkeys(METRIC_UNITS.get(k) or metric_label(k) for k in keys))  # each unit once


_state: dict = {"theme": None}  # None: not chosen yet, detect_theme() decides on first use
_live: weakref.WeakSet = weakref.WeakSet()  # LiveFigure objects to re-theme on set_theme


def log_ticks(values) -> dict:
    """Ticks for a log axis over ``values`` (zeros, None and NaN ignored): 1, 2, 5 in each decade, each labelled
    in full. Plotly's own labels a tick between decades by its first digit alone (30 reads "3").

    >>> log_ticks([1.0, 31.0])
    {'tickvals': [1, 2, 5, 10, 20, 50], 'ticktext': ['1', '2', '5', '10', '20', '50']}
    """
    vals = [float(v) for v in values if v is not None and v == v and v > 0]
    if not vals:
        raise ValueError("values: expected at least one positive number to place log ticks")
    lo, hi = math.floor(math.log10(min(vals))), math.ceil(math.log10(max(vals)))
    ticks = [m * 10 ** e for e in range(lo, hi + 1) for m in (1, 2, 5)]
    ticks = [t for t in ticks if t <= 10 ** math.log10(max(vals)) * 2.0 and t >= min(vals) / 2.0]
    ticks = [int(t) if t >= 1 else t for t in ticks]
    return {"tickvals": ticks, "ticktext": [f"{t:g}" for t in ticks]}


def detect_theme(env=None) -> str:
    """The theme figures start in: ``RLNB_THEME`` ("light" or "dark") when set, else the theme saved in
    JupyterLab's user settings (a theme whose name says dark, e.g. "JupyterLab Dark", is dark), else light.

    Plotly cannot see JupyterLab's theme, and the kernel cannot ask the page while a cell runs; the settings
    file is where JupyterLab keeps the learner's choice, on the machine the kernel usually runs on."""
    env = os.environ if env is None else env
    name = env.get("RLNB_THEME")
    if name:
        if name not in TEMPLATES:
            raise ValueError(f"RLNB_THEME: expected one of {sorted(TEMPLATES)}, got {name!r}")
        return name
    root = env.get("JUPYTERLAB_SETTINGS_DIR") or str(Path.home() / ".jupyter" / "lab" / "user-settings")
    path = Path(root) / "@jupyterlab" / "apputils-extension" / "themes.jupyterlab-settings"
    try:
        text = path.read_text(encoding="utf-8")   # JSON with comments: read the one key, do not parse
    except (OSError, UnicodeDecodeError):
        return "light"
    found = re.search(r'"theme"\s*:\s*"([^"]*)"', text)
    return "dark" if found and "dark" in found.group(1).lower() else "light"


def set_theme(name: str) -> None:
    """Use the ``"light"`` or ``"dark"`` plotly template for all rlnb figures, live ones included."""
    if name not in TEMPLATES:
        raise ValueError(f"name: expected one of {sorted(TEMPLATES)}, got {name!r}")
    _state["theme"] = name
    for live in list(_live):
        live.retheme()


def get_theme() -> str:
    """``"light"`` or ``"dark"``: what ``set_theme`` chose, else ``detect_theme()``."""
    if _state["theme"] is None:
        _state["theme"] = detect_theme()
    return _state["theme"]


def template() -> str:
    """The plotly template name of the current theme."""
    return TEMPLATES[get_theme()]


def themed(fig: go.Figure) -> go.Figure:
    """Apply the current theme (and rlnb's compact margins, where the figure set none) to ``fig``, in place;
    returns it. A second y axis drawn over the first gets its own round ticks and no grid (plotly would sync its
    ticks to the first axis's grid: 0.221, 0.442, ...). In a notebook the cell also gets the style sheet that
    repaints the figure when JupyterLab's theme changes (``page_style``)."""
    page_style.show_once_per_cell()
    m = fig.layout.margin
    fig.update_layout(template=template(), margin={k: v if v is not None else d for k, v, d in (
        ("l", m.l, 50), ("r", m.r, 20), ("t", m.t, 60), ("b", m.b, 40))})
    for name in fig.layout:
        axis = fig.layout[name]
        if name.startswith("yaxis") and getattr(axis, "overlaying", None) and axis.tickmode is None:
            axis.update(tickmode="auto", showgrid=False)
    return fig


def register_live(obj) -> None:
    """Remember a live figure holder (anything with ``retheme()``) without keeping it alive."""
    _live.add(obj)
