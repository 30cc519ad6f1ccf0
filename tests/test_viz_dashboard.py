"""Dashboard throttling and final draws, backends, show_source, and the widgets on a real tiny Trainer."""

import inspect
import sys
from types import SimpleNamespace

import numpy as np
import plotly.graph_objects as go
import pytest

import rlnb.viz.backend as backend_mod
import rlnb.viz.live.dashboard as dashboard_mod
from rlnb.algos.advantages import rloo
from rlnb.viz import ClipExplorer, Dashboard, EntropyView, TokenXRay, get_backend, set_backend, show_source
from rlnb.viz.figures.train import cell_text
from rlnb.viz.figures.zoo import trace


@pytest.fixture(autouse=True)
def reset_backend():
    yield
    set_backend("auto")


class FakeTrainer:
    """What the dashboard reads: ``history`` and ``step_count`` (and the running target, if any)."""

    def __init__(self, target=None):
        self.history, self.step_count, self.run_target = [], 0, target

    def step(self):
        self.step_count += 1
        s = self.step_count
        self.history.append({"step": s, "reward": s / 100, "accuracy": 0.5, "entropy": 1 - s / 200, "kl": 0.0,
                             "clip_ratio/low_mean": 0.0, "clip_ratio/high_mean": 0.01,
                             "completions/mean_length_correct": None if s % 2 else 5.0,
                             "completions/mean_length_wrong": 7.0, "frac_reward_zero_std": 0.25})


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


@pytest.mark.parametrize("backend", ["widget", "static"])
def test_dashboard_throttles_by_wall_time_and_draws_the_last_step(backend):
    clock, tr = Clock(), FakeTrainer(target=100)
    dash = Dashboard(max_fps=4, clock=clock, backend=backend)
    for _ in range(100):          # 100 steps in one simulated second, 10 ms apart
        tr.step()
        clock.t += 0.01
        dash(tr, None)
    # a redraw at most every 0.25 s: t = 0.01, 0.26, 0.51, 0.76, plus the forced last step
    assert dash.n_calls == 100 and dash.n_draws == 5 and not dash.pending
    assert list(trace(dash.fig, "reward").x) == list(range(1, 101))
    assert np.allclose(trace(dash.fig, "reward").y, np.arange(1, 101) / 100)
    wrong = np.array(trace(dash.fig, "completions/mean_length_correct").y, dtype=float)
    assert np.isnan(wrong[0]) and wrong[1] == 5.0                       # None (no right rows) is a gap
    assert "step 100" in dash.status.value
    if backend == "static":
        assert dash.live.n_renders == 1 + 5                             # the empty first draw, then 5


def test_dashboard_real_clock_fast_loop_and_flush():
    tr = FakeTrainer()              # no known target: the last step waits for flush()
    dash = Dashboard(max_fps=4, backend="static")
    for _ in range(200):
        tr.step()
        dash(tr, None)
    assert dash.n_draws <= 3 and dash.pending                           # 200 calls in well under 0.5 s
    dash.flush()
    assert not dash.pending and len(trace(dash.fig, "reward").x) == 200
    n = dash.n_draws
    dash.flush()                                                        # nothing new: no redraw
    assert dash.n_draws == n


def test_dashboard_draws_when_the_cell_ends(monkeypatch):
    events = []
    shell = SimpleNamespace(events=SimpleNamespace(register=lambda name, fn: events.append((name, fn)),
                                                   unregister=lambda name, fn: events.remove((name, fn))))
    monkeypatch.setattr(dashboard_mod, "shell", lambda: shell)
    clock, tr = Clock(), FakeTrainer()
    dash = Dashboard(clock=clock, backend="static")
    tr.step()
    dash(tr, None)                   # drawn
    tr.step()
    dash(tr, None)                   # throttled: a post_run_cell hook is registered, once
    tr.step()
    dash(tr, None)
    assert dash.pending and [e[0] for e in events] == ["post_run_cell"]
    events[0][1]()                   # the cell ends (or was interrupted)
    assert not dash.pending and events == [] and len(trace(dash.fig, "reward").x) == 3


def test_dashboard_evaluates_every_k_steps_and_draws_then():
    clock, tr = Clock(), FakeTrainer()
    tr.evaluate = lambda n: {"pass@1": tr.step_count / 10 + n / 1000}
    dash = Dashboard(eval_every=2, eval_n=5, clock=clock, backend="static")
    for _ in range(5):
        tr.step()
        dash(tr, None)                                                  # the clock never moves
    assert dash.n_draws == 3 and dash.pending                           # step 1, then the evaluations at 2 and 4
    assert list(trace(dash.fig, "eval/pass@1").x) == [2, 4]
    assert np.allclose(trace(dash.fig, "eval/pass@1").y, [0.205, 0.405])


def test_dashboard_metrics_and_arguments():
    dash = Dashboard(metrics=["entropy", "grad_norm"], backend="static")
    assert [t.meta for t in dash.fig.data] == ["entropy", "grad_norm"]
    with pytest.raises(ValueError, match="max_fps"):
        Dashboard(max_fps=0)
    with pytest.raises(ValueError, match="eval_every"):
        Dashboard(eval_every=-1)
    with pytest.raises(ValueError, match="metrics"):
        Dashboard(metrics="reward")


def test_backend_selection(monkeypatch):
    with pytest.raises(ValueError, match="name: expected one of"):
        set_backend("matplotlib")
    for var in ("VSCODE_PID", "VSCODE_CWD", "RLNB_VIZ_BACKEND"):
        monkeypatch.delenv(var, raising=False)
    set_backend("auto")
    assert get_backend() == "widget"                                    # anywidget is installed here
    monkeypatch.setitem(sys.modules, "google.colab", SimpleNamespace())
    assert get_backend() == "static"
    monkeypatch.delitem(sys.modules, "google.colab")
    monkeypatch.setenv("RLNB_VIZ_BACKEND", "static")
    assert get_backend() == "static"
    set_backend("widget")                                               # an explicit choice wins
    assert get_backend() == "widget"


def test_static_backend_in_a_shell_uses_plotlys_renderer(monkeypatch):
    """In a kernel the Output gets what plotly's renderer makes: in Colab, HTML loading plotly.js."""
    import plotly.io as pio

    monkeypatch.setattr(backend_mod, "shell", lambda: object())
    monkeypatch.setattr(pio.renderers, "default", "colab")
    live = backend_mod.LiveFigure(go.Figure(go.Scatter(y=[1, 2], name="a")), backend="static")
    data = live.view.outputs[0]["data"]
    assert "plotly" in data["text/html"] and "application/vnd.plotly.v1+json" not in data


def test_show_source_prints_and_returns_live_source(capsys):
    import functools

    src = show_source(functools.partial(rloo, group_size=4))          # a bind()-style partial
    text = open(inspect.getsourcefile(rloo)).read()
    assert src.startswith('@ADVANTAGES.register("rloo")\ndef rloo(') and src in text
    assert "def rloo(" in capsys.readouterr().out
    html = src._repr_html_()
    assert '<span style="color' in html                                 # inline styles: no stylesheet needed
    assert '<pre style="background: transparent; color: #1a1a1a' in html and "background: #f8f8f8" in html  # a light card
    with pytest.raises(TypeError, match="obj: expected a function"):
        show_source(len)


def test_show_source_dedents_methods():
    src = show_source(Dashboard.flush)
    assert src.startswith("def flush(self)")


# --- on a real tiny trainer ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def trainer():
    from rlnb import Trainer

    # two epochs per batch: the second sees a ratio != 1 (when some group has signal), so clipping can fire
    return Trainer.tiny("grpo", task="add", seed=0, prompts_per_step=2, num_generations=8, num_iterations=2,
                        warmup_steps=0)


def test_dashboard_run_on_a_trainer_and_interrupt(trainer):
    clock = Clock()                 # frozen: after the draw below, every step is throttled
    dash = Dashboard(trainer, clock=clock, backend="static")
    dash.draw()

    def interrupt(tr, record):
        raise KeyboardInterrupt     # what the kernel's stop button does between steps

    # nothing returned: a cell ending with dash.run shows the dashboard, not a wall of history dicts
    assert dash.run(trainer, 3, callbacks=[interrupt], progress=False) is None
    assert trainer.step_count == 1                                      # Trainer.run stopped cleanly
    assert list(trace(dash.fig, "reward").x) == [1] and not dash.pending   # flushed after the interrupt
    assert np.allclose(trace(dash.fig, "entropy").y, [h["entropy"] for h in trainer.history])


def test_widgets_on_a_trainer_record(trainer):
    def with_signal():
        return [r for r in trainer.records if (r.batch.adv != 0).any()]

    if not trainer.records:
        trainer.step()
    x, first = TokenXRay(trainer), trainer.step_count
    while not with_signal() and trainer.step_count < 6:                # all-equal groups move nothing
        trainer.step()
    assert with_signal(), "no group with different rewards in 6 steps"
    if trainer.step_count == first:
        trainer.step()
    x.refresh()                                                         # the slider reaches the new steps
    assert x.controls["step"].max == x.controls["step"].value == x.values["step"] == trainer.step_count  # its step
    b = trainer.records[-1].batch
    g = x.controls["group"].value
    assert g == b.signal_group()                                        # it jumps to a group with signal
    row = g * b.group_size
    n = int(b.mask[row].sum())
    tokens = trainer.tokenizer.convert_ids_to_tokens(b.completion_ids[row, :n].tolist())
    assert list(x.fig.data[0].hovertext[0][:n]) == tokens                        # the hover: each token whole
    assert list(x.fig.data[0].text[0][:n]) == [cell_text(t) for t in tokens]     # the cell: what fits

    rec = with_signal()[-1]
    b, st = rec.batch, rec.stats
    clip = ClipExplorer(batch=b, stats=st, recipe=trainer.recipe)
    m = b.mask.bool()
    assert clip.values["clip_ratio/high_mean"] == pytest.approx(float(st.clipped_high[m].float().mean()), abs=1e-9)
    assert clip.values["clip_ratio/low_mean"] == pytest.approx(float(st.clipped_low[m].float().mean()), abs=1e-9)
    with clip.hold():                                                   # tight bounds: PPO's rule by hand
        clip.controls["eps_low"].value = clip.controls["eps_high"].value = 1e-5
    A = b.adv[:, None].expand_as(st.ratio)
    high = ((st.ratio > 1 + 1e-5) & (A > 0) & m).sum() / m.sum()
    low = ((st.ratio < 1 - 1e-5) & (A < 0) & m).sum() / m.sum()
    assert float(high + low) > 0                                        # the second epoch moved the ratio
    one_token = 1 / float(m.sum())                                      # float32 ratios on the boundary
    assert clip.values["clip_ratio/high_mean"] == pytest.approx(float(high), abs=one_token)
    assert clip.values["clip_ratio/low_mean"] == pytest.approx(float(low), abs=one_token)
    ent = EntropyView(trainer=trainer)
    assert ent.values["last entropy"] == pytest.approx(trainer.history[-1]["entropy"])


def test_display_hands_the_frontend_the_current_figure(backend):
    """A change inside the redraw interval waits for it; displaying the view sends it at once, so a view drawn
    now starts from the figure as it is (the page's model holds the whole figure, never a partial copy)."""
    import json

    from rlnb.viz import ClipExplorer

    ex = ClipExplorer()
    ex.live.min_interval = 3600.0                      # every later change waits for the interval
    ex.controls["eps_high"].value = 0.31
    assert ex.live.pending and "0.31" not in json.loads(ex.live.view.figure)["layout"]["title"]["text"]
    ex._repr_mimebundle_()
    shown = json.loads(ex.live.view.figure)
    assert not ex.live.pending and ex.live.view.version == ex.live.version
    assert [t.get("name") for t in shown["data"]] == [t.name for t in ex.fig.data]
    assert shown["layout"]["title"]["text"] == ex.fig.layout.title.text and "0.31" in ex.fig.layout.title.text
