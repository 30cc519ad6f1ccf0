"""The lab's scenarios: runs set up to show one symptom from the source articles, and the knob to try on it.

Each scenario is a set of knob changes (applied through the lab, at the next step boundary) and the knob
change that treats it. The lab tries the fix in a fork ("set up the symptom, fork, apply the fix in one branch"),
so the fix races the untreated run from the same weights, seed and prompts. The numbers each one quotes are
measured the same way on the toy by ``scripts/measure_lab_scenarios.py`` (stored in
``docs/results/lab_scenarios.json``), never typed in, and judged by the rules declared here (``shown``,
``helped``). ``measure_kl`` gives a run without a reference its starting weights as one, so the KL a scenario like
"drift" shows is measured from the first step.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results" / "lab_scenarios.json"


WINDOW = 5    # steps averaged at the start and at the end of a race
DECIDE = 0.8  # one window "beats" another when its step wins at least this share of the pairs of steps (ties half)


@dataclass(frozen=True)
class Scenario:
    """``setup``: knob changes that produce the symptom; ``warm``: steps to play with them before the fix is
    tried (the symptom must still be ahead: a crashed model cannot be rescued by a fork); ``fix``: the knob change
    to try; ``metric``: the history key where the symptom shows; ``reference``: whether it needs a reference model
    (to see KL)."""

    name: str
    symptom: str
    setup: dict
    fix: dict
    metric: str
    advice: str
    warm: int = 5
    better: int = 1  # +1: the fix should end the metric higher than the symptom run; -1: lower
    trend: int = -1  # the symptom is the metric falling (-1) or rising (+1) over the run; 0: a level (``level``)
    level: float = 0.0  # with trend 0: the symptom is the metric ending on the wrong side of this (``better``)
    reference: bool = False
    cure: bool = False  # the fix must stop the symptom in the fork, not only slow it (a slower crash is a crash);
    # False where a race this short cannot tell stopped from slowed (a penalised KL still rises, to a bound)


# Each one's symptom shows on the toy and its fix is checked to help (``helped``) by
# ``scripts/measure_lab_scenarios.py``; a test keeps the stored measurements to that. "entropy collapse" was
# dropped: on the toy, several updates per batch at a high lr crash the reward and *raise* the entropy (measured
# mu = 4, lr = 5e-4: 0.39 -> 0.57 nats, reward 0), and its thermostat fix drove the entropy to several nats at
# reward 0; chapter 06 treats entropy on a run long enough to show it.
SCENARIOS = {s.name: s for s in (
    Scenario("no signal", "most groups have the same reward for every completion: their advantage is 0",
             setup={"num_generations": 2}, fix={"num_generations": 8}, metric="frac_reward_zero_std", better=-1, trend=0,
             level=0.5,
             advice="with G=2 a group often has two equal rewards; a larger G (or dynamic sampling, "
             "filters=('dynamic_sampling',) with max_gen_rounds > 1) gives more groups a spread"),
    Scenario("drift", "the KL to the starting model grows without bound",
             setup={"lr": 3e-4, "beta": 0.0}, fix={"beta": 0.1}, metric="kl", better=-1, trend=1, reference=True,
             advice="beta 0 lets the policy wander; a KL penalty (beta > 0) pulls it back toward the start"),
    Scenario("instability", "the reward climbs, then crashes to 0",
             setup={"lr": 1e-3}, fix={"lr": 1e-4}, metric="reward", warm=2, cure=True,
             advice="lr too high: the reward crashes within a few steps, so fork early; the fork with a lower lr "
             "from the same step keeps its reward"),
)}


def measured() -> dict:
    """The stored measurements (empty when the script has not been run)."""
    return json.loads(RESULTS.read_text()) if RESULTS.exists() else {}


def beats(a, b) -> bool:
    """Whether the values ``a`` beat ``b``: a step of ``a`` is higher than a step of ``b`` in at least ``DECIDE``
    of the pairs (ties count half). A rank rule, so one spike (a KL of 2.8 among 0.2s) does not decide it.

    >>> beats([0.3, 0.2, 0.4], [0.1, 0.1, 0.2]), beats([0.3, 0.2, 0.4], [0.3, 0.2, 0.4]), beats([0.0], [0.0])
    (True, False, False)
    """
    if not a or not b:
        raise ValueError("a, b: expected non-empty lists of per-step values")
    wins = sum((x > y) + 0.5 * (x == y) for x in a for y in b)
    return wins >= DECIDE * len(a) * len(b)


def _mean(xs) -> float:
    return sum(xs) / len(xs)


def _runs(m: dict) -> list[dict]:
    if not m.get("runs"):
        raise ValueError("m: expected a measurement with per-seed 'runs' (scripts/measure_lab_scenarios.py)")
    return m["runs"]


def _shown_in(s: Scenario, values: list) -> bool:
    start, end = values[:WINDOW], values[-WINDOW:]
    if s.trend == 0:
        return -s.better * (_mean(end) - s.level) > 0
    return beats(end, start) if s.trend > 0 else beats(start, end)


def shown(name: str, m: dict) -> bool:
    """Whether the untreated run showed the symptom on every measured seed: its metric's last ``WINDOW`` steps
    beat its first ones the symptom's way (or, for a symptom that is a level, ended on its wrong side: most
    groups without signal)."""
    s = SCENARIOS[name]
    return all(_shown_in(s, r["symptom"][s.metric]) for r in _runs(m))


def _failures(s: Scenario, r: dict) -> list[str]:
    sym, fix = r["symptom"], r["fix"]
    a, b = sym[s.metric][-WINDOW:], fix[s.metric][-WINDOW:]
    out = [] if (beats(b, a) if s.better > 0 else beats(a, b)) else [f"{s.metric} not better than untreated"]
    if beats(sym["reward"][-WINDOW:], fix["reward"][-WINDOW:]):
        out.append("reward below the untreated run's")
    if s.cure and _shown_in(s, fix[s.metric]):
        out.append("the fork shows the symptom too")
    return out


def helped(name: str, m: dict) -> bool:
    """Whether the fix helped on every measured seed: over the last ``WINDOW`` steps its metric beats the
    untreated run's (``beats``, the better way); it did not wreck the reward (the untreated run's reward over
    the last steps does not beat the fix's); and, for a scenario marked ``cure``, the fork does not show the
    symptom itself (a lower lr whose reward still falls, 0.089 -> 0.031, did not treat a crash)."""
    s = SCENARIOS[name]
    return all(not _failures(s, r) for r in _runs(m))


def why_not(name: str, m: dict) -> list[str]:
    """What failed, per seed, when ``helped`` is False (empty when it helped)."""
    s = SCENARIOS[name]
    return [f"seed {r['seed']}: {w}" for r in _runs(m) for w in _failures(s, r)]


def ends(m: dict, branch: str, key: str) -> tuple[float, float]:
    """Mean over seeds of ``key``'s first and last ``WINDOW`` steps in ``branch`` ("symptom" or "fix")."""
    rs = _runs(m)
    return (_mean([_mean(r[branch][key][:WINDOW]) for r in rs]), _mean([_mean(r[branch][key][-WINDOW:]) for r in rs]))


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
    text = (f"{name.capitalize()}: {s.symptom}. Set up with {knobs_text(s.setup)} and play {s.warm} steps; then "
            f"Fork and fix: the fork runs with {knobs_text(s.fix)} from that step while the main run "
            f"goes on untreated ({s.advice}).")
    m = measured().get(name)
    if m:
        (a0, a1), (b0, b1) = ends(m, "symptom", s.metric), ends(m, "fix", s.metric)
        run = (f"Measured on the toy ({s.warm} steps set up, then a fork raced {m['steps']} steps; seeds "
               f"{', '.join(str(r['seed']) for r in _runs(m))}; P = {m['P']}, G = {m['G']} unless set)")
        if not shown(name, m):
            return text + (f" {run}: {s.metric} went {a0:.3g} -> {a1:.3g} in the untreated run, so the "
                           "symptom did not show in a run this short, and there was nothing for the fix to treat.")
        verdict = "which helped (checked on each seed: the metric better, the reward kept)" if helped(name, m) \
            else f"which did not help ({'; '.join(why_not(name, m))})"
        text += (f" {run}: {s.metric} went {a0:.3g} -> {a1:.3g} untreated (the symptom showed), and "
                 f"{b0:.3g} -> {b1:.3g} in the fork with the fix, {verdict}.")
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
