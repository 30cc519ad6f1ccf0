"""The lab's scenarios are ones whose symptom shows on the toy and whose fix is checked to help: "helped" means
the fix's metric beat the untreated run's *and* the reward was not wrecked (issue 44: a thermostat "fix" that drove
entropy to several nats at reward 0, and a lower lr whose reward fell 0.089 -> 0.031, both used to count)."""

import pytest

from rlnb.lab.scenarios import SCENARIOS, WINDOW, beats, describe, helped, measured, shown, why_not


def run(metric, sym, fix, sym_reward, fix_reward, seed=0):
    return {"seed": seed, "symptom": {metric: sym, "reward": sym_reward}, "fix": {metric: fix, "reward": fix_reward}}


def test_beats_is_a_rank_rule_one_spike_does_not_decide():
    assert beats([0.3, 0.2, 0.4, 0.3, 0.2], [0.1, 0.1, 0.1, 0.05, 0.1])
    assert not beats([0.0, 0.0, 0.0, 0.0, 2.8], [0.1, 0.1, 0.1, 0.1, 0.1])        # a mean would say yes
    assert not beats([0.1] * 5, [0.1] * 5)                                         # ties count half
    with pytest.raises(ValueError, match="a, b: expected non-empty"):
        beats([], [1.0])


def test_a_fix_that_wrecks_the_reward_did_not_help():
    """The lower lr 'helped' the crash at 0.089 -> 0.031: its own reward fell, so the fork crashed too."""
    falling = [0.09, 0.1, 0.08, 0.09, 0.09] + [0.03, 0.03, 0.02, 0.04, 0.03]
    m = {"runs": [run("reward", [0.09] * 5 + [0.0] * 5, falling, [0.09] * 5 + [0.0] * 5, falling)]}
    assert shown("instability", m) and not helped("instability", m)
    assert why_not("instability", m) == ["seed 0: the fork shows the symptom too"]


def test_a_fix_that_moves_its_metric_but_loses_the_reward_did_not_help():
    kl_up = [0.04 * i for i in range(1, 11)]
    m = {"runs": [run("kl", kl_up, [0.05] * 10, [0.2] * 10, [0.0] * 10)]}
    assert shown("drift", m) and not helped("drift", m)
    assert why_not("drift", m) == ["seed 0: reward below the untreated run's"]


def test_a_fix_must_help_on_every_seed():
    kl_up = [0.04 * i for i in range(1, 11)]
    good = run("kl", kl_up, [0.05] * 10, [0.1] * 10, [0.1] * 10)
    bad = run("kl", kl_up, kl_up, [0.1] * 10, [0.1] * 10, seed=1)
    assert helped("drift", {"runs": [good]}) and not helped("drift", {"runs": [good, bad]})


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_shipped_scenario_shows_its_symptom_and_its_fix_helps(name):
    m = measured()[name]
    assert m["warm"] == SCENARIOS[name].warm and m["setup"] == SCENARIOS[name].setup
    assert len(m["runs"]) >= 2 and all(len(r["fix"]["reward"]) >= 2 * WINDOW for r in m["runs"])
    assert shown(name, m), f"{name}: the untreated run did not show the symptom"
    assert helped(name, m), why_not(name, m)
    assert "which helped" in describe(name)


def test_the_stored_measurements_hold_no_dropped_scenario():
    assert set(measured()) == set(SCENARIOS)
