"""Several seeds in one figure: a mean line with a min..max band per arm, or a mean with error bars per
group. The course never shows per-seed numbers as a table (../shared/course.md, "Figures and widgets").

Pure builders: data in, themed plotly figure out, testable without a kernel.
"""

from __future__ import annotations

import plotly.graph_objects as go

from rlnb.viz.figures import theme


def _check_runs(runs: dict) -> None:
    if not isinstance(runs, dict) or not runs:
        raise ValueError(f"runs: expected a non-empty dict of arm -> list of per-seed curves, got {runs!r}")
    for arm, curves in runs.items():
        if not curves or len({len(c) for c in curves}) != 1 or not len(curves[0]):
            raise ValueError(f"runs[{arm!r}]: expected one or more per-seed curves of the same non-zero length")


def band_stats(curves: list[list[float]]) -> tuple[list[float], list[float], list[float]]:
    """Mean, min and max over seeds at each point of equal-length per-seed ``curves``.

    >>> band_stats([[0.0, 1.0], [2.0, 3.0]])
    ([1.0, 2.0], [0.0, 1.0], [2.0, 3.0])
    """
    cols = list(zip(*curves))
    return [sum(c) / len(c) for c in cols], [min(c) for c in cols], [max(c) for c in cols]


def seed_bands(runs: dict[str, list[list[float]]], *, x: list | None = None, title: str, xaxis: str = "step",
               yaxis: str, label: str = "", colors: dict | None = None) -> go.Figure:
    """One mean line per arm with a shaded min..max band over its seeds.

    ``runs``: arm -> per-seed curves (equal lengths); ``x`` defaults to 1..n; ``label`` is added to each
    legend entry ("live", "shipped"). Colours: ``colors[arm]`` if given, else ``theme.recipe_color(arm)``; an arm
    whose colour would not stand apart from an earlier arm's gets another (``theme.run_colors``).
    """
    _check_runs(runs)
    fig = go.Figure()
    palette = theme.run_colors(runs, colors)
    for arm, curves in runs.items():
        mean, lo, hi = band_stats(curves)
        xs = list(x) if x is not None else list(range(1, len(mean) + 1))
        color = palette[arm]
        if len(curves) > 1:
            fig.add_scatter(x=xs + xs[::-1], y=hi + lo[::-1], fill="toself", line=dict(width=0, color=color),
                            opacity=0.2, showlegend=False, hoverinfo="skip")
        seeds = f"mean of {len(curves)} seeds, band min..max" if len(curves) > 1 else "1 seed"
        fig.add_scatter(x=xs, y=mean, mode="lines", line=dict(color=color),
                        name=f"{arm} ({seeds}{', ' + label if label else ''})")
    fig.update_layout(title=title, xaxis_title=xaxis, yaxis_title=yaxis, height=380,
                      legend=dict(orientation="h", y=-0.25))
    return theme.themed(fig)


def seed_bars(groups: dict[str, dict[str, list[float]]], *, title: str, xaxis: str, yaxis: str, label: str = "",
              colors: dict | None = None) -> go.Figure:
    """Grouped bars: per series (colour) and group (x position) the mean over seeds, with error bars from
    the smallest to the largest seed (none when there is one value). ``xaxis``/``yaxis``: the axis titles.

    ``groups``: series -> {x-group -> per-seed values}; ``colors``: series -> colour (default
    ``theme.recipe_color(series)``; kept distinct by ``theme.run_colors``).
    """
    if not isinstance(groups, dict) or not groups:
        raise ValueError(f"groups: expected a non-empty dict of series -> {{group -> per-seed values}}, got {groups!r}")
    fig = go.Figure()
    palette = theme.run_colors(groups, colors)
    for series, by_x in groups.items():
        if not by_x or any(not v for v in by_x.values()):
            raise ValueError(f"groups[{series!r}]: expected at least one value per group")
        xs = list(by_x)
        mean = [sum(v) / len(v) for v in by_x.values()]
        color = palette[series]
        n = max(len(v) for v in by_x.values())
        seeds = f"mean of {n} seeds, bars min..max" if n > 1 else "exact"
        fig.add_bar(x=xs, y=mean, name=f"{series} ({seeds}{', ' + label if label else ''})",
                    marker_color=color, offsetgroup=series,
                    error_y=None if n == 1 else dict(
                        type="data", symmetric=False, array=[max(v) - m for v, m in zip(by_x.values(), mean)],
                        arrayminus=[m - min(v) for v, m in zip(by_x.values(), mean)]))
    fig.update_layout(title=title, xaxis_title=xaxis, yaxis_title=yaxis, barmode="group", height=380, legend=dict(orientation="h", y=-0.25))
    return theme.themed(fig)
