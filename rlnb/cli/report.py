"""``report.html``: a run as a page a person would send to a colleague, offline (plotly.js embedded).

What ran (recipe, task, model, steps), the settings that differ from the recipe's own, held-out pass@1 before
and after, the training curves with axis titles and human labels (the dashboard's figure), the time per stage,
and the rest of the summary. The page follows the reader's light or dark system theme.
"""

from __future__ import annotations

import html
from pathlib import Path

# (panel title, metrics): the dashboard's panels, plus what a run report is read for (gradient norm, loss,
# learning rate); nine, so that the 3 x 3 grid has no empty frame
REPORT_PANELS = (
    ("reward and sampled accuracy", ("reward", "accuracy")),
    ("entropy", ("entropy",)),
    ("KL to reference", ("kl",)),
    ("clip fraction", ("clip_ratio/low_mean", "clip_ratio/high_mean")),
    ("mean length: right vs wrong", ("completions/mean_length_correct", "completions/mean_length_wrong")),
    ("zero-variance groups", ("frac_reward_zero_std",)),
    ("gradient norm", ("grad_norm",)),
    ("loss", ("loss",)),
    ("learning rate", ("learning_rate",)),
)

SUMMARY_LABELS = {"steps_target": "steps asked for", "steps": "steps done", "interrupted": "stopped early",
                  "wall_s_this_invocation": "wall time of the last invocation (s)"}

CSS = """
body { font: 15px/1.5 system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em;
       color: #222; background: #fff; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; } td, th { padding: 0.2em 0.8em; text-align: left; }
th { border-bottom: 1px solid #999; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.dark { display: none; }
@media (prefers-color-scheme: dark) {
  body { color: #ddd; background: #111; } .dark { display: block; } .light { display: none; }
}
"""


def report_figure(history: list[dict], title: str, theme_name: str = "light"):
    """The training curves: one panel per ``REPORT_PANELS`` entry, every axis titled, traces by their labels."""
    from rlnb.viz.figures import theme
    from rlnb.viz.figures.train import dashboard_figure

    series = {m: ([h["step"] for h in history if m in h], [h[m] for h in history if m in h])
              for _, ms in REPORT_PANELS for m in ms}
    before = theme.get_theme()
    theme.set_theme(theme_name)  # only figures built now; no live figure in a CLI run
    try:
        return dashboard_figure(series=series, panels=REPORT_PANELS, title=title)
    finally:
        theme.set_theme(before)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    if isinstance(v, dict):
        return ", ".join(f"{k} = {_fmt(x)}" for k, x in v.items())
    return str(v)


def _table(head: tuple[str, ...], rows: list[tuple]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td class='{'n' if isinstance(c, (int, float)) else ''}'>{html.escape(_fmt(c))}"
                                    "</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{th}</tr>{body}</table>"


def _sections(summary: dict, changed: dict) -> str:
    before, after = summary.get("greedy_pass@1_before"), summary.get("greedy_pass@1_after")
    out = ["<h2>Held-out pass@1 (greedy)</h2>",
           _table(("before", "after", "change"), [(before if before is not None else "-",
                                                   after if after is not None else "not measured",
                                                   after - before if None not in (before, after) else "-")])]
    out.append("<h2>Settings that differ from the recipe's own</h2>")
    out.append(_table(("setting", "this run", "recipe default"), [(k, a, b) for k, (a, b) in changed.items()])
               if changed else "<p>none: the recipe as it ships.</p>")
    stages = summary.get("mean_time_per_stage_s") or {}
    total = sum(stages.values()) or 1.0
    out.append("<h2>Time per step, by stage</h2>")
    out.append(_table(("stage", "seconds per step", "share"),
                      [(k.removeprefix("timing/").removesuffix("_s"), v, f"{v / total:.0%}") for k, v in stages.items()]))
    rest = {k: v for k, v in summary.items() if not k.startswith("greedy_pass@1") and k != "mean_time_per_stage_s"}
    out.append("<h2>Run</h2>" + _table(("", ""), [(SUMMARY_LABELS.get(k, k), v) for k, v in rest.items()]))
    return "".join(out)


def changed_settings(recipe) -> dict:
    """setting -> (this run's value, the named recipe's own): what the command line changed."""
    from rlnb import recipes

    try:
        base = recipes.get(recipe.name).to_dict()
    except KeyError:  # a recipe composed by hand: compare with the plain Recipe's defaults
        base = type(recipe)().to_dict()
    return {k: (v, base.get(k)) for k, v in recipe.to_dict().items() if k != "name" and base.get(k) != v}


def write_report(history: list[dict], path, *, title: str = "rlnb run", summary: dict | None = None,
                 changed: dict | None = None) -> Path:
    """Write the run's page to one self-contained HTML file. ``changed``: setting -> (this run, default)."""
    light = report_figure(history, title, "light").to_html(full_html=False, include_plotlyjs=True)
    dark = report_figure(history, title, "dark").to_html(full_html=False, include_plotlyjs=False)
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>"
            f"{_sections(summary or {}, changed or {})}<h2>Training curves</h2>"
            f"<div class='light'>{light}</div><div class='dark'>{dark}</div></body></html>")
    path = Path(path)
    path.write_text(page, encoding="utf-8")
    return path
