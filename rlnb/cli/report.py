"""An offline HTML report of a run's curves (plotly, with plotly.js embedded: opens without internet)."""

from __future__ import annotations

from pathlib import Path

REPORT_METRICS = [
    ("reward", "reward (mean)"), ("accuracy", "sampled pass@1 (training batches)"),
    ("entropy", "entropy (nats/token)"), ("kl", "KL to reference"),
    ("clip_ratio/region_mean", "clip fraction"), ("completions/mean_length", "completion length (tokens)"),
    ("frac_reward_zero_std", "share of zero-variance groups"), ("grad_norm", "gradient norm"),
]


def curves_figure(history: list[dict], title: str = ""):
    """A grid of the main training curves against the step."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=2, cols=4, subplot_titles=[label for _, label in REPORT_METRICS])
    steps = [h["step"] for h in history]
    for i, (key, label) in enumerate(REPORT_METRICS):
        ys = [h.get(key) for h in history]
        fig.add_trace(go.Scatter(x=steps, y=ys, mode="lines", name=label, showlegend=False), row=i // 4 + 1, col=i % 4 + 1)
    fig.update_layout(title=title, height=560, margin=dict(l=40, r=20, t=80, b=40))
    return fig


def write_report(history: list[dict], path, *, title: str = "rlnb run", summary: dict | None = None) -> Path:
    """Write the curves (and a summary table) to one self-contained HTML file."""
    import html

    fig = curves_figure(history, title)
    body = fig.to_html(full_html=False, include_plotlyjs=True)
    rows = "".join(f"<tr><td>{html.escape(str(k))}</td><td>{html.escape(str(v))}</td></tr>" for k, v in (summary or {}).items())
    page = f"<html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head><body>{body}<table>{rows}</table></body></html>"
    path = Path(path)
    path.write_text(page)
    return path
