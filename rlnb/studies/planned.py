"""Every training-level claim under the decision rule of ``rlnb.studies.decide``: its plan's specification
(``SPECS``), the plans made from it (the pilot's spread measured, the seeds power needs), and one verdict per
claim (``judge``) from the data shipped today and from its third attempt, each labelled with its seeds and with
"plan written after the data" where the runs predate the plan.
"""

from __future__ import annotations

import math

from rlnb.studies.decide import (
    MIN_SEEDS,
    Check,
    Decision,
    Plan,
    decide,
    load_plans,
    plan_before_data,
    seeds_for_power,
)
from rlnb.studies.results import StudyResult, load_result
from rlnb.studies.summary import Stat, spec_label

_PCT = dict(percent=True)
_HIGH = Check("mean:clip_ratio/high_mean", "control", ">=", 0.01, "tokens GRPO clips high (ratio > 1 + eps_high, A > 0)",
              **_PCT)
_COLLAPSE = Check("change:entropy", "control", "<", -0.05, "entropy change without the countermeasure")
_ZERO = Check("mean:frac_reward_zero_std", "control", ">=", 0.2, "groups without signal", **_PCT)
_TRUNC = Check("mean:completions/clipped_ratio", "control", ">=", 0.05, "samples truncated at L_max", **_PCT)
_P1 = "change:eval/sampled/pass@1"
_DAPO_MDE = (0.03, "about half of GRPO's own +0.054 sampled pass@1 gain in this setting: a change that helps by less "
                   "is not what DAPO reports")

# key: (third study, arm, control, spec, sign, mde, reason, pilot (file, arm, control), checks)
SPECS: dict[str, tuple] = {
    "updates_collapse": ("entropy_third", "none", "mu=1", "change:entropy", -1, 0.05,
                         "a quarter of the 0.2-nat collapse entropy_collapse measured",
                         ("pilots/pilot_entropy_updates", "mu=4x4", "mu=1"),
                         (Check("mean:clip_ratio/region_mean", "arm", ">=", 0.01,
                                "tokens outside the clip range under reuse", **_PCT),)),
    "thermostat": ("entropy_third", "thermostat", "none", "final:entropy", 1, 0.1,
                   "half the 0.2-nat collapse: holding less than half of it is not 'keeping entropy up'",
                   ("entropy_collapse", "thermostat", "none"),
                   (_COLLAPSE, Check("mean:entropy_coef", "arm", ">=", 0.001, "the thermostat's mean coefficient"))),
    "clip_higher_entropy": ("entropy_mu4", "clip-higher", "none", "mean:entropy", 1, 0.02,
                            "a tenth of the 0.2-nat collapse, averaged over the run", ("entropy_mu4", "clip-higher",
                                                                                      "none"), (_HIGH, _COLLAPSE)),
    "clip_higher_entropy_third": ("cliphigh_third", "clip-higher", "none", "mean:entropy", 1, 0.02,
                                  "a tenth of the 0.2-nat collapse, averaged over the run",
                                  ("entropy_third", "clip-higher", "none"), (_HIGH, _COLLAPSE)),
    "bonus": ("entropy_mu4", "bonus 0.01", "none", "mean:entropy", 1, 0.2, "the size of the collapse itself "
              "(the bonus's spread over seeds is 0.39 nats)", ("entropy_mu4", "bonus 0.01", "none"), (_COLLAPSE,)),
    "beta_slows": ("beta_third", "beta=0.04", "beta=0.5", _P1, 1, 0.02, "a fifth of beta 0.04's own gain (+0.10)",
                   ("beta", "beta=0.04", "beta=0.5"), ()),
    "beta_drift": ("beta_third", "beta=0", "beta=0.5", "final:eval/kl_to_init", 1, 0.03,
                   "a quarter of the drift beta = 0 reached (0.11 nats)", ("beta", "beta=0", "beta=0.5"), ()),
    "length_bias": ("length_third", "seq-mean-token-mean", "token-mean", "mean:completions/mean_length_wrong", 1,
                    0.5, "half a token: the aggregations' earlier differences were about 1 token",
                    ("length_bias", "seq-mean-token-mean", "token-mean"), ()),
    "dynamic_sampling": ("dynsamp_third", "grpo+dynamic-sampling", "grpo", "mean:groups_with_signal", 1, 1.0,
                         "one more group with signal of the 16 in an update", ("dynamic_sampling",
                                                                               "grpo+dynamic-sampling", "grpo"),
                         (_ZERO,)),
    "dapo_clip_higher": ("entropy_third", "clip-higher", "none", _P1, 1, 0.04,
                         "two thirds of GRPO's own +0.061 sampled pass@1 gain on Countdown at 4 x 4 (entropy_mu4)",
                         ("entropy_mu4", "clip-higher", "none"), (_HIGH,)),
    "dapo_token_mean": ("dapo_third", "+token-mean", "grpo", _P1, 1, *_DAPO_MDE,
                        ("dapo_one_at_a_time", "+token-mean", "grpo"),
                        (Check("mean:completions/mean_length_wrong", "control", ">=", 12.0,
                               "mean length of wrong answers (tokens; long wrong answers)"),)),
    "dapo_overlong": ("dapo_third", "+overlong-filter", "grpo", _P1, 1, *_DAPO_MDE,
                      ("dapo_one_at_a_time", "+overlong-filter", "grpo"), (_TRUNC,)),
    "dapo_dynamic": ("dapo_third", "+dynamic-sampling", "grpo", _P1, 1, *_DAPO_MDE,
                     ("dapo_one_at_a_time", "+dynamic-sampling", "grpo"), (_ZERO,)),
    "dapo_whole": ("dapo_third", "dapo", "grpo", _P1, 1, *_DAPO_MDE, ("dapo_ablation", "dapo", "grpo"),
                   (_TRUNC, _ZERO)),
    "maxrl_pass_k": ("maxrl_third", "maxrl", "grpo", "change:eval/sampled/pass@8", 1, 0.05,
                     "half of GRPO's own pass@8 drop in maxrl_long (-0.10)", ("maxrl_long", "maxrl", "grpo"),
                     (Check("change:eval/sampled/pass@8", "control", "<", 0.0, "GRPO's own pass@8 change",
                            interval=True),)),
    "scalerl_rank": ("maxrl_third", "maxrl", "grpo", "asymptote:eval/sampled/pass@1", 1, 0.05,
                     "a ranking must tell asymptotes 0.05 pass@1 apart; direction fixed: maxrl above grpo",
                     ("maxrl_long", "maxrl", "grpo"), ()),
    "reward_hacking": ("hacking_third", "beta=2", "beta=0", "final:rewards/loophole/mean", -1, 0.1,
                       "a tenth of the completions paid through the hole",
                       ("reward_hacking", "beta=2", "beta=0"),
                       (Check("final:rewards/loophole/mean", "control", ">=", 0.2,
                              "completions paid only through the loophole at beta 0", **_PCT),)),
    "ppo_vs_grpo": ("ppo_third", "ppo", "grpo", "change:eval/greedy/pass@1", 1, 0.05,
                    "about GRPO's own greedy gain over this budget (+0.043)", ("ppo_vs_grpo", "ppo", "grpo"), ()),
    "credit_race": ("credit_third", "vineppo", "grpo", "change:eval/greedy/pass@1", 1, 0.1,
                    "about GRPO's own greedy gain over this budget (+0.09)", ("credit_race", "vineppo", "grpo"), ()),
}
FIRST_SEED = 10
FIRST_SEEDS = {"cliphigh_third": 40}  # a study whose pilot ran on seeds 10+ of the same setting starts above them


def pilot_stat(file: str, arm: str, control: str, spec: str, root=None) -> Stat:
    """The paired differences of the pilot (``asymptote:<metric>``: fitted A, pairs with both fits determined)."""
    res = load_result(file, root=root)
    if spec.startswith("asymptote:"):
        return asymptote_diffs(res, arm, control, spec.split(":", 1)[1])[0]
    return res.diff(arm, control, spec)


def make_plans(keys=None, root=None) -> dict:
    """``{key: Plan}`` with each pilot's spread measured now and the seeds (10, 11, ...) 80 % power needs."""
    keys = list(keys or SPECS)
    sds = {k: pilot_stat(*SPECS[k][7], SPECS[k][3], root).std for k in keys}
    need: dict[str, int] = {}  # one seed list per study: the most any of its plans needs
    for k in keys:
        n = seeds_for_power(sds[k], SPECS[k][5]) if sds[k] == sds[k] else MIN_SEEDS
        need[SPECS[k][0]] = max(need.get(SPECS[k][0], MIN_SEEDS), n)
    out = {}
    for key in keys:
        file, arm, control, spec, sign, mde, reason, (pf, pa, pc), checks = SPECS[key]
        shipped = not file.endswith("_third")  # measured before this rule: its plan keeps the shipped seeds
        first = FIRST_SEEDS.get(file, FIRST_SEED)
        seeds = tuple(load_result(file, root=root).seeds) if shipped else tuple(range(first, first + need[file]))
        sd = round(sds[key], 5) if sds[key] == sds[key] else math.nan
        out[key] = Plan(key, file, arm, control, spec, sign, mde, reason, f"{pf} ({pa} - {pc})", sd, seeds, checks,
                        kind="asymptote" if spec.startswith("asymptote:") else "paired")
    return out


def asymptote_diffs(res, arm: str, control: str, metric: str) -> tuple[Stat, str]:
    """ScaleRL's fitted asymptote A, arm - control per seed, on the seeds where both fits are determined; and why
    fits were left out (flat: B < 1e-4; no asymptote: A at its bound or the midpoint beyond the data)."""
    from rlnb.studies.scaling import seed_fits

    a, b = seed_fits(res, arm, metric), seed_fits(res, control, metric)
    fits = list(a.values()) + list(b.values())
    flat = sum(f.B < 1e-4 for f in fits)
    bad = sum(f.B < 1e-4 or f.extrapolated for f in fits)
    ok = lambda f: not (f.B < 1e-4 or f.extrapolated)  # noqa: E731
    seeds = [s for s in a if s in b and ok(a[s]) and ok(b[s])]
    points = min((len(r.evals) for r in res.runs), default=0)
    why = f"{bad} of {len(fits)} fits without an asymptote ({flat} flat, B < 1e-4); {points} evaluation points per run"
    return Stat(tuple(a[s].A - b[s].A for s in seeds)), why


def judge(plan: Plan, file: str, arm: str, control: str | None, written: str, root=None) -> tuple[Decision, str]:
    """The plan's verdict on ``file``'s ``arm`` - ``control``, and its label: seeds, MDE, progress, timing."""
    res = load_result(file, root=root)
    if file == plan.file:  # the plan's own study: the seeds it fixed, no others
        res = StudyResult([r for r in res.runs if r.seed in plan.seeds], res.config)
    failed, active, fits = [], [], ""
    if plan.kind == "asymptote":
        d, why = asymptote_diffs(res, arm, control, plan.spec.split(":", 1)[1])
        points = min(len(r.evals) for r in res.runs)
        paired = len({r.seed for r in res.runs if r.arm == arm} & {r.seed for r in res.runs if r.arm == control})
        if points < 8 or (d.n < MIN_SEEDS and paired >= MIN_SEEDS):  # too few points, or too many fits left out
            failed.append(f"{why} (needs >= 8 points and >= {MIN_SEEDS} seeds with both fits determined)")
        fits = f" with both fits determined, of {paired} ({why})"  # the seeds left out, and why
    elif not {arm, control} <= set(res.arms):  # a queue that has not reached both arms yet
        d = Stat(())
    else:
        d = res.diff(arm, control, plan.spec) if control else res.value(arm, plan.spec)
        for c in plan.checks if d.n >= 2 else ():
            ok, reason = c.measure(res, arm, control)
            (active if ok else failed).append(reason)
    dec = decide(d, plan.sign, plan.mde, digits=3, failed="; ".join(failed))
    need = plan.power_seeds
    few = f" (< {MIN_SEEDS})" if d.n < MIN_SEEDS else ""
    power = f"; power needs {need}" if need and need > d.n else ""
    status = res.config.get("status", "")
    done = f", {status.split(' (')[0]} done" if "partial" in status else ""
    after = "" if plan_before_data(res, written) else ", plan written after the data"
    where = f"docs/results/{file}.json.gz" if root is None else f"{root}/{file}.json.gz"
    if dec.verdict == "not measured":  # fewer than two pairs yet: no interval, only progress
        return Decision("not measured", "not measured yet", d, head="not measured yet", nums="no interval yet"), \
            f"{status.split(' (')[0] or '0 runs'} done; {where}"
    acted = f"; mechanism active: {' and '.join(active)}" if active and not failed else ""  # why a null informs
    label = f"{d.n} seeds{fits if not failed else ''}{few}{power}{done}{after}{acted}; {where}"
    return dec, label


def plan_for(key: str, root=None):
    plans = load_plans(root)
    if key not in plans:
        raise KeyError(f"plan: no plan {key!r} in docs/results/plans.json; a claim is not judged without one")
    return plans[key]


def _words(spec: str) -> str:
    if spec.startswith("asymptote:"):
        return f"fitted asymptote of {spec_label('final:' + spec.split(':', 1)[1]).rsplit(',', 1)[0]}"
    return spec_label(spec)


def _progress(plan: Plan, root=None) -> tuple[int, int]:
    """(runs done, runs planned) of the plan's own study: its two arms on its seeds."""
    try:
        have = {(r.arm, r.seed) for r in load_result(plan.file, root=root).runs}
    except FileNotFoundError:
        have = set()
    want = [(a, s) for a in (plan.arm, plan.control) if a for s in plan.seeds]
    return sum(w in have for w in want), len(want)


def row(key: str, shipped, root=None) -> dict:
    """One claim's verdict: ``shipped`` (a (file, arm, control) measured before its plan, or None) and the plan's
    own study; the third attempt decides once every planned run is done, the shipped data until then.
    ``line`` is the whole row (the README's), ``short`` the verdict, its numbers, MDE and seeds alone."""
    plan, written, _ = plan_for(key, root)
    what = f"{plan.arm} - {plan.control}, {plan.spec}, MDE {plan.mde:g} ({plan.mde_reason})"
    parts, verdict = [], None
    done, total = _progress(plan, root)
    third = plan.file != (shipped or (None,))[0]
    if third and done:
        dec, label = judge(plan, plan.file, plan.arm, plan.control, written, root)
        parts.append(f"third attempt ({plan.arm} - {plan.control}; plan: {len(plan.seeds)} seeds, "
                     f"{plan.seeds[0]}-{plan.seeds[-1]}): {'' if done == total else 'interim, '}{dec.line} ({label})")
        verdict = (dec, label) if done == total else None
    elif third:
        parts.append(f"third attempt {plan.file}: 0 of {len(plan.seeds)} seeds run (plan: seeds "
                     f"{plan.seeds[0]}-{plan.seeds[-1]})")
    decided_by = (plan.file, plan.arm, plan.control) if verdict is not None else shipped
    if shipped is not None and verdict is None:
        verdict = judge(plan, *shipped, written, root)
        what = f"{shipped[1]} - {shipped[2]}" + what[what.index(","):]  # the shipped file's own arm names
    elif shipped is not None:
        dec, label = judge(plan, *shipped, written, root)
        parts.insert(0, f"earlier: {dec.line} ({label})")
    under_way = f"third attempt under way: {done} of {total} runs" if third and done < total else ""
    if verdict is None:
        return {"verdict": "not measured", "line": f"**not measured yet**: {what}; " + "; ".join(parts),
                "short": f"**not measured yet** ({under_way})", "plan": plan}
    dec, label = verdict
    line = f"**{dec.head}**: {dec.nums}; {what}; {label}"
    short = (f"**{dec.head}**: {what.split(',', 1)[0]}, {_words(plan.spec)}: {dec.nums}; MDE {plan.mde:g}; "
             f"{label.rsplit('; ', 1)[0]}")
    return {"verdict": dec.verdict, "stat": dec.stat, "ci": dec.ci, "plan": plan, "decided_by": decided_by,
            "line": "; ".join([line, *parts]), "short": short + (f"; {under_way}" if under_way else "")}
