"""The lab's scenarios: runs set up to show one symptom from the seeds, and the knob to try on it.

Each scenario is a set of knob changes (applied through the lab, at the next step boundary) and the knob
change that treats it. The lab tries the fix in a fork ("set up the symptom, fork, apply the fix in one branch"),
so the fix races the untreated run from the same weights, seed and prompts. The numbers each one quotes are
measured the same way on the toy by ``scripts/measure_lab_scenarios.py`` (stored in
``docs/results/lab_scenarios.json``), never typed in. ``measure_kl`` gives a run without a reference its starting
weights as one, so the KL a scenario like "drift" shows is measured from the first step.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results" / "lab_scenarios.json"


@dataclass(frozen=True)
class Scenario:
    """``setup``: knob changes that produce the symptom; ``fix``: the knob change to try; ``metric``: the
    history key where the symptom shows; ``reference``: whether it needs a reference model (to see KL)."""

    name: str
    symptom: str
    setup: dict
    fix: dict
    metric: str
    advice: str
    better: int = 1  # +1: the fix should end the metric higher than the symptom run; -1: lower
    trend: int = -1  # the symptom is the metric falling (-1) or rising (+1) over the run; 0: a level (``level``)
    level: float = 0.0  # with trend 0: the symptom is the metric ending on the wrong side of this (``better``)
    reference: bool = False


SCENARIOS = {s.name: s for s in (
    Scenario("entropy collapse", "entropy falls step after step: the policy stops exploring",
             setup={"num_iterations": 4, "lr": 2e-4}, fix={"entropy_target": 0.4, "entropy_coef": 0.01},
             metric="entropy", advice="several updates per batch at a high lr sharpen the policy fast; try the "
             "entropy thermostat (entropy_target) or clip-higher (eps_high 0.28), and check the reward still "
             "discriminates (zero-variance groups)"),
    Scenario("no signal", "most groups have the same reward for every completion: their advantage is 0",
             setup={"num_generations": 2}, fix={"num_generations": 8}, metric="frac_reward_zero_std", better=-1, trend=0,
             level=0.5,
             advice="with G=2 a group often has two equal rewards; a larger G (or dynamic sampling, "
             "filters=('dynamic_sampling',) with max_gen_rounds > 1) gives more groups a spread"),
    Scenario("drift", "the KL to the starting model grows without bound",
             setup={"lr": 3e-4, "beta": 0.0}, fix={"beta": 0.1}, metric="kl", better=-1, trend=1, reference=True,
             advice="beta 0 lets the policy wander; a KL penalty (beta > 0) pulls it back toward the start"),
    Scenario("instability", "the reward climbs, then crashes to 0",
             setup={"lr": 1e-3}, fix={"lr": 1e-4}, metric="reward",
             advice="lr too high: the reward crashes; the fork with a lower lr from the same step does not"),
)}


def measured() -> dict:
    """The stored measurements (empty when the script has not been run)."""
    return json.loads(RESULTS.read_text()) if RESULTS.exists() else {}


def shown(name: str, m: dict) -> bool:
    """Whether the set-up run showed its symptom: the metric moved the symptom's way from start to end (or, for a
    symptom that is a level, ended on the wrong side of it: most groups without signal)."""
    s, a = SCENARIOS[name], m["symptom"]
    if s.trend == 0:
        return -s.better * (a["end"] - s.level) > 0
    return s.trend * (a["end"] - a["start"]) > 0


def helped(name: str, m: dict) -> bool:
    """Whether the fix ended the watched metric on the better side of the symptom run."""
    return SCENARIOS[name].better * (m["fix"]["end"] - m["symptom"]["end"]) > 0


def knobs_text(knobs: dict) -> str:
    """Knob changes as prose: ``{"lr": 0.001, "beta": 0.0}`` -> ``"lr = 0.001 and beta = 0"``.

    >>> knobs_text({"entropy_target": 0.4, "entropy_coef": 0.01, "lr": 3e-4})
    'entropy_target = 0.4, entropy_coef = 0.01 and lr = 0.0003'
    """
    parts = [f"{k} = {v:g}" if isinstance(v, float) else f"{k} = {v}" for k, v in knobs.items()]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def describe(name: str) -> str:
    """What the scenario sets up, how to try the fix in a fork, and what that did on the toy (measured), as prose."""
    s = SCENARIOS[name]
    text = (f"{name.capitalize()}: {s.symptom}. Set up with {knobs_text(s.setup)} and play until the symptom "
            f"shows; then Fork and fix: the fork runs with {knobs_text(s.fix)} from that step while the main run "
            f"goes on untreated ({s.advice}).")
    m = measured().get(name)
    if m:
        a, b = m["symptom"], m["fix"]
        run = (f"Measured on the toy ({m.get('warm', 0)} steps set up, then a fork raced {m['steps']} steps; P = "
               f"{m['P']}, G = {m['G']} unless set)")
        if not shown(name, m):
            return text + (f" {run}: {s.metric} went {a['start']:.3g} -> {a['end']:.3g} in the untreated run, so the "
                           "symptom did not show in a run this short, and there was nothing for the fix to treat.")
        verdict = "moved it the expected way" if helped(name, m) else "did not move it the expected way"
        text += (f" {run}: {s.metric} went {a['start']:.3g} -> {a['end']:.3g} untreated (the symptom showed), and "
                 f"{b['start']:.3g} -> {b['end']:.3g} in the fork with the fix, which {verdict}.")
    return text


def measure_kl(trainer):
    """Give a trainer without a reference the run's starting weights as one, so the lab logs the KL to the start
    at every step whatever beta is (beta = 0 keeps it out of the loss): turning beta on then shows its effect, not
    a jump from "unmeasured". Costs one reference forward per step. Returns the reference it added (or None:
    the trainer had one, or its model is too big to have kept its starting weights)."""
    if trainer.ref_model is not None:
        return None
    try:
        return trainer.use_reference("start")
    except ValueError:
        return None
