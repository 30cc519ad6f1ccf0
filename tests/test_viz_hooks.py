"""The stable hooks tests and scripts find rlnb's widgets by (rlnb.viz.hooks): classes and data attributes that do
not change when a title or label is reworded."""

from __future__ import annotations

import html
import json
import re

from rlnb.viz import ClipExplorer, Dashboard, TokenXRay
from rlnb.viz.explorers.base import knob_control
from rlnb.viz.hooks import kind


def _values(readout_html: str) -> dict:
    return json.loads(html.unescape(re.search(r"data-rlnb-values='([^']*)'", readout_html).group(1)))


def test_explorer_box_and_controls_carry_their_kind_and_knob_names():
    e = ClipExplorer()
    classes = e.widget._dom_classes
    assert "rlnb-widget" in classes and "rlnb-clip-explorer" in classes
    for name, w in e.controls.items():
        assert f"rlnb-knob-{name}" in w._dom_classes and "rlnb-knob" in w._dom_classes
    e.controls["eps_high"].description = "ε high (a better label)"   # wording changes, the hook does not
    assert "rlnb-knob-eps_high" in e.controls["eps_high"]._dom_classes
    assert set(_values(e.readout.value)) >= {"clip_ratio/high_mean"}


def test_knob_controls_carry_their_knob_name():
    for name, value in (("beta", 0.04), ("advantage", "grpo"), ("eps_low", 0.2)):
        assert f"rlnb-knob-{name}" in knob_control(name, value)._dom_classes


class _Trainer:
    """What the dashboard reads: history and step_count."""

    def __init__(self, steps: int):
        self.history = [{"step": s, "reward": s / 7, "accuracy": 0.5, "entropy": 0.25} for s in range(1, steps + 1)]
        self.step_count, self.run_target = steps, None


def test_dashboard_status_hands_over_step_and_numbers():
    tr, dash = _Trainer(3), Dashboard(max_fps=4, clock=lambda: 0.0, backend="static")
    dash(tr, None)                               # the first call draws
    got = _values(dash.status.value)
    assert got == {"step": 3.0, "reward": 3 / 7, "accuracy": 0.5, "entropy": 0.25}
    assert "rlnb-dashboard" in dash.widget._dom_classes


def test_kind_names():
    assert [kind(c) for c in (ClipExplorer, TokenXRay, Dashboard)] == ["clip-explorer", "token-x-ray", "dashboard"]


def test_lab_status_buttons_and_change_labels():
    from rlnb import Trainer
    from rlnb.viz import Lab

    t = Trainer.tiny("grpo", task="add", seed=0, prompts_per_step=2, num_generations=4, max_new_tokens=8)
    lab = Lab(t, backend="static")
    try:
        assert "rlnb-lab" in lab.widget._dom_classes
        assert {f"rlnb-button-{b}" for b in ("play", "pause", "fork", "close-fork", "fork-and-fix")} <= {
            c for w in lab.buttons.values() for c in w._dom_classes}
        lab.step()
        lab.set("beta", 0.05)
        lab.step()
        lab._refresh()
        got = _values(lab.status.value)
        assert got["step"] == 2 and got["changes"] == 1 and "fork_since" not in got
        assert "data-rlnb-state='paused'" in lab.status.value
        labels = [a.text for a in lab.dashboard.fig.layout.annotations if a.name == "rlnb-change"]
        assert labels == ["beta 0.05"], labels          # named once, in the first panel, on its line
        lab.fork()
        lab._refresh()
        assert _values(lab.status.value)["fork_since"] == 2
    finally:
        lab.close()
