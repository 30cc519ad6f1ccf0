"""The lab's panel without a kernel: controls from the knob declarations, markers, status, fallback."""

import ipywidgets as widgets
import pytest

from rlnb import Trainer
from rlnb.lab.scenarios import SCENARIOS, describe
from rlnb.viz import Lab
from rlnb.viz.live.lab_panel import KNOBS


def tiny():
    return Trainer.tiny("grpo", prompts_per_step=2, num_generations=4, max_new_tokens=10)


def test_controls_are_built_from_the_knob_declarations():
    t = tiny()
    lab = Lab(t, backend="static")
    assert set(KNOBS) | {"recipe"} == set(lab.controls)
    assert isinstance(lab.controls["lr"], widgets.FloatLogSlider) and lab.controls["lr"].value == pytest.approx(1e-4)
    assert isinstance(lab.controls["num_generations"], widgets.IntSlider) and lab.controls["num_generations"].value == 4
    assert lab.controls["eps_high"].value == pytest.approx(t.knob("eps_high"))
    assert "grpo" in lab.controls["recipe"].options
    assert set(t.logged_knobs) == set(KNOBS)
    lab.close()


def test_slider_change_marks_the_curves_and_the_status():
    t = tiny()
    lab = Lab(t, backend="static")
    lab.step()
    lab.controls["beta"].value = 0.05       # paused: applies now, runs from step 2 on
    lab.step()
    assert [h["hp/beta"] for h in t.history] == [0.0, 0.05]
    lab.dashboard.draw()
    assert any(s.x0 == 1.5 for s in lab.dashboard.fig.layout.shapes)
    assert "last change: beta 0 -> 0.05 at step 2" in lab.dashboard.fig.layout.title.text
    assert lab.status.value.count("step 2") == 2 and "paused" in lab.status.value  # "at step 2" too
    lab.close()


def test_a_bad_value_from_a_control_is_refused_and_the_control_goes_back():
    t = tiny()
    lab = Lab(t, backend="static")
    lab.controls["num_generations"].max = 40
    lab._on_control("eps_high", -0.5)   # what a typed-in readout could send
    assert "eps_high" in lab.message.value and t.knob("eps_high") == lab.controls["eps_high"].value
    lab.step()
    assert t.step_count == 1 and lab.loop.pending == {}
    lab.close()


def test_recipe_dropdown_switches_at_the_boundary():
    t = tiny()
    lab = Lab(t, backend="static")
    lab.controls["recipe"].value = "dr_grpo"
    assert t.recipe.aggregation == "seq-mean-token-sum-norm" and t.recipe.name == "dr_grpo"
    lab.step()
    assert t.step_count == 1
    lab.close()


def test_step_stage_shows_each_stage_and_xray_appears():
    t = tiny()
    lab = Lab(t, backend="static")
    stages = [lab.step_stage()[0] for _ in range(4)]
    assert stages == ["sample", "reward", "advantage", "update"] and "update" in lab.stage_view.value
    assert lab.xray is not None and lab.xray.values["step"] == 1
    lab.close()


def test_scenarios_set_up_their_knobs_and_quote_measured_numbers():
    t = tiny()
    lab = Lab(t, backend="static")
    lab.set_up("drift")
    assert t.ref_model is not None and t.recipe.lr == SCENARIOS["drift"].setup["lr"]
    with pytest.raises(ValueError, match="name: expected one of the scenarios"):
        lab.set_up("nope")
    text = describe("instability")
    assert "Set up with lr = 0.001 and play" in text and "the fork runs with lr = 0.0001" in text
    assert "{" not in text                                                              # prose, not a dict
    lab.close()


def test_close_stops_the_thread_and_a_second_lab_is_refused():
    t = tiny()
    lab = Lab(t, backend="static")
    with pytest.raises(RuntimeError, match="another Lab"):
        Lab(t, backend="static")
    lab.play()
    lab.close()
    assert not lab.loop._thread.is_alive() and lab.loop.closed
    Lab(t, backend="static").close()


def test_closing_the_widget_stops_the_thread():
    t = tiny()
    lab = Lab(t, backend="static")
    box = lab.widget
    lab.play()
    box.close()
    assert lab.loop.closed and not lab.loop._thread.is_alive() and lab.loop.state == "paused"
    assert len(t.history) == t.step_count
    Lab(t, backend="static").close()  # released: a new lab may drive the trainer


def test_a_scenario_whose_symptom_did_not_show_does_not_claim_the_fix_helped(monkeypatch):
    import rlnb.lab.scenarios as sc

    flat = {"kl": [0.2] * 10, "reward": [0.1] * 10}                     # the KL never grew: no drift to treat
    run = {"steps": 10, "P": 8, "G": 8, "runs": [{"seed": 0, "symptom": flat, "fix": flat}]}
    monkeypatch.setattr(sc, "measured", lambda: {"drift": run})
    text = sc.describe("drift")
    assert "did not show" in text and "helped" not in text


def test_a_slider_drag_is_one_change():
    """The lab's sliders report on release: a drag logs one knob change, not one per pixel."""
    import ipywidgets as widgets

    lab = Lab(tiny(), backend="static")
    sliders = [w for w in lab.controls.values() if isinstance(w, (widgets.FloatSlider, widgets.IntSlider,
                                                                  widgets.FloatLogSlider))]
    assert len(sliders) >= 3 and all(w.continuous_update is False for w in sliders)
    lab.close()


def test_the_lab_measures_kl_to_the_start_whatever_beta_and_hands_the_reference_back():
    t = Trainer.tiny("grpo", prompts_per_step=4, num_generations=8, seed=0)   # room for a group with signal
    assert t.ref_model is None and t.recipe.beta == 0
    lab = Lab(t, backend="static")
    assert t.ref_model is not None                                      # the run's starting weights
    moved = lambda: any(h["grad_norm"] > 0 for h in t.history[:-1])  # noqa: E731  (an update before the last step)
    while not moved() or len(t.history) < 2:
        assert len(t.history) < 12, "no group with signal in 12 small steps"
        lab.step()
    assert t.records[-1].stats.token_kl is not None and t.history[0]["kl"] == 0   # step 1: the policy is the start
    assert t.history[-1]["kl"] > 0 and t.recipe.beta == 0               # measured; beta = 0 keeps it out of the loss
    lab.close()
    assert t.ref_model is None                                          # what the lab added, it removes


def test_a_level_symptom_shows_when_the_untreated_run_ends_on_its_wrong_side():
    from rlnb.lab.scenarios import helped, shown

    def run(end, fix):
        one = lambda x: {"frac_reward_zero_std": [0.9] * 5 + [x] * 5, "reward": [0.1] * 10}  # noqa: E731
        return {"runs": [{"seed": 0, "symptom": one(end), "fix": one(fix)}]}

    assert shown("no signal", run(0.8, 0.6)) and helped("no signal", run(0.8, 0.6))   # most groups without signal
    assert not shown("no signal", run(0.3, 0.2))                                       # most groups had signal
    assert not helped("no signal", run(0.8, 0.9))


def test_the_set_up_and_fork_and_fix_buttons_while_playing_act_at_a_step_boundary_and_play_on():
    """``lab.set_up`` is refused while playing (pause first); the buttons pause at the boundary, act, play on."""
    t = tiny()
    lab = Lab(t, backend="static")
    lab.play()
    try:
        lab.wait(1)
        lab.scenario.value = "instability"
        lab.buttons["Set up"].click()
        assert lab.message.value == "" and lab.loop.state == "playing"
        lab.buttons["Fork and fix"].click()
        assert lab.message.value == "" and lab.loop.state == "playing" and lab.loop.fork_branch is not None
        lab.wait(lab.loop.fork_branch.since + 1)
    finally:
        lab.pause()
    assert t.recipe.lr == 1e-3 and lab.loop.fork_branch.recipe.lr == 1e-4
    assert lab.loop.fork_branch.history[-1]["step"] == t.step_count
    lab.close()
