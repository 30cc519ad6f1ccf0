"""The source articles' claims, each with its chapter, its mechanism check and its training-level evidence.

Evidence is either **live** (a notebook shows it in the run; the text says what) or a **training-level
comparison** shipped in ``docs/results`` (``Paired``: arm minus control, per seed, on one spec; ``Asymptote``:
ScaleRL's fitted asymptote per seed), judged by the one decision rule of ``rlnb.studies.decide`` under the
claim's plan (``docs/results/plans.json``, ``rlnb.studies.planned``): reproduced, effect above X excluded,
inconclusive, or untestable here, each with its numbers, its seeds, its MDE and, where the runs predate the
plan, "plan written after the data".

``table_markdown()`` writes the README's claims table from the files (``scripts/regen_tables.py``), so
it cannot go stale; notebooks print ``describe(claim)`` for the same numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rlnb.studies.results import StudyResult, load_result
from rlnb.studies.scaling import seed_fits  # noqa: F401  (re-exported: notebooks call claims.seed_fits)
from rlnb.studies.summary import Stat, spec_label

Z_POWER = 1.96 + 0.84  # two-sided 5 % test, 80 % power (normal approximation)


def seeds_needed(diffs: Stat, mde: float | None = None) -> float:
    """Seeds a paired comparison needs for 80 % power at 5 % (two-sided t-test, ``decide.seeds_for_power``) to
    detect ``mde`` (default: the observed mean difference) at the observed spread; inf when the effect is 0.

    >>> seeds_needed(Stat((0.1, 0.3, 0.2)))        # sd 0.1, mean 0.2: n = 5 gives (2.776 + 0.941)^2 / 4 = 3.5 <= 5
    5
    """
    from rlnb.studies.decide import seeds_for_power

    effect = abs(diffs.mean) if mde is None else mde
    if diffs.n < 2 or effect == 0:
        return math.inf
    return seeds_for_power(diffs.std, effect, minimum=2)


@dataclass(frozen=True)
class Paired:
    """``arm`` minus ``control`` per seed on ``spec`` in results file ``file`` (``control=None``: the arm's own
    value); ``sign`` the claimed direction; ``digits`` for printing."""

    file: str
    arm: str
    control: str | None
    spec: str
    sign: int = 1
    digits: int = 3
    also: tuple = ()  # further specs printed with the verdict (same arms), e.g. what the effect cost

    def stat(self, root=None) -> tuple[Stat, list[int]]:
        res = load_result(self.file, root=root)
        d = res.value(self.arm, self.spec) if self.control is None else res.diff(self.arm, self.control, self.spec)
        return d, res.seeds

    def what(self) -> str:
        return f"{self.arm}" + (f" - {self.control}" if self.control else "") + f", {self.spec}"


def seed_asymptotes(result, arm: str, metric: str = "eval/sampled/pass@1") -> tuple[Stat, int]:
    """The asymptote A of each seed's fit, and how many of those fits are extrapolated (A not determined)."""
    fits = seed_fits(result, arm, metric)
    return Stat(tuple(f.A for f in fits.values())), sum(f.extrapolated for f in fits.values())


@dataclass(frozen=True)
class Asymptote:
    """ScaleRL's fitted asymptote A, ``arm`` minus ``control`` per seed (one fit per seed)."""

    file: str
    arm: str
    control: str
    metric: str = "eval/sampled/pass@1"
    sign: int = 1
    digits: int = 3

    def stat(self, root=None) -> tuple[Stat, list[int]]:
        res = load_result(self.file, root=root)
        a, b = seed_fits(res, self.arm, self.metric), seed_fits(res, self.control, self.metric)
        seeds = [s for s in a if s in b]
        return Stat(tuple(a[s].A - b[s].A for s in seeds)), seeds

    def extrapolated(self, root=None) -> int:
        res = load_result(self.file, root=root)
        return sum(seed_asymptotes(res, arm, self.metric)[1] for arm in (self.arm, self.control))

    def what(self) -> str:
        return f"fitted asymptote A of {self.metric}, {self.arm} - {self.control}"


@dataclass(frozen=True)
class Claim:
    text: str
    chapters: str
    mechanism: str
    evidence: Paired | Asymptote | str | None  # a str: live, what the notebook shows; None: nothing shipped yet
    plan: str = ""  # the key of its plan in docs/results/plans.json: a training-level claim under the rule


def describe(claim: Claim, root=None) -> dict:
    """The claim's training-level verdict: ``{"verdict", "line", "source", ...}`` (``planned.row``'s for a claim with
    a plan: one of ``decide.VERDICTS`` or "not measured"); a live claim gives ``verdict = "live"`` and its text."""
    ev = claim.evidence
    if isinstance(ev, str):  # what the chapter shows live
        return {"verdict": "live", "line": f"live: {ev}", "source": "live"}
    from rlnb.studies.planned import row

    shipped = None if ev is None else (ev.file, ev.arm, ev.control)
    try:
        out = row(claim.plan, shipped, root)
    except FileNotFoundError as e:
        return {"verdict": "not measured", "line": f"not measured yet ({e})", "source": "missing"}
    for spec in getattr(ev, "also", ()):  # what the effect cost, on the runs that decided the verdict
        file, arm, control = out.get("decided_by") or (ev.file, ev.arm, ev.control)
        res = load_result(file, root=root)
        if file == out["plan"].file:  # the plan's own study: the seeds it fixed, as its verdict
            res = StudyResult([r for r in res.runs if r.seed in out["plan"].seeds], res.config)
        a = res.diff(arm, control, spec)
        lo, hi = a.ci95()
        if a.n < 2:  # a file that does not measure it
            continue
        out["line"] += f"; also {spec} {a.mean:+.3f} [{lo:+.3f}, {hi:+.3f}] ({file})"
        words = f"{spec_label(spec)} {a.mean:+.3f} [95 % CI {lo:+.3f}, {hi:+.3f}]"
        out["short"] += f"; also {words}"
        out.setdefault("also", []).append(words)
    out["source"] = f"docs/results/{(ev or out['plan']).file}.json.gz"
    return out


def verdict_markdown(*plans: str, root=None) -> str:
    """The claims whose plans are ``plans`` (keys of docs/results/plans.json), each as its verdict in one short
    line with the whole row folded beneath it: what a chapter prints. An unknown key is an error, so a renamed
    plan cannot silently drop a verdict from a chapter."""
    by_plan = {c.plan: c for c in CLAIMS if c.plan}
    unknown = [p for p in plans if p not in by_plan]
    if unknown or not plans:
        raise KeyError(f"plans: expected keys of claims with a plan, got {unknown or 'none'}; known: "
                       f"{sorted(by_plan)}")
    out = []
    for p in plans:
        d = describe(by_plan[p], root)
        out.append(f"- *{by_plan[p].text}*: {d['short']}\n\n  <details><summary>the whole row: comparison, "
                   f"plan, every attempt</summary>\n\n  {d['line']}\n\n  </details>\n")
    return "\n".join(out)


_DAPO = "dapo_one_at_a_time"
CLAIMS: tuple[Claim, ...] = (
    Claim("A short GRPO run lifts held-out pass@1", "00", "old log-probs equal the update's bit for bit; rewards "
          "and advantages recomputed by hand", "held-out greedy and sampled pass@1 before/after, seed 0 (also in smoke)"),
    Claim("Larger G: fewer zero-signal groups, lower baseline error, but not always better", "01, 03",
          "no-signal share and baseline RMSE against their formulas", "held-out gain at a fixed sample budget, G = 2..16"),
    Claim("Group normalisation removes shared noise, not per-sample noise", "02",
          "a shared offset changes GRPO, RLOO, Dr. GRPO advantages by exactly 0", "per-sample vs shared noise, 3 seeds"),
    Claim("Normalisation cannot create signal the reward lacks", "03", "a pure-noise reward gets unit-size advantages",
          "a pure-noise reward learns nothing while the real one learns"),
    Claim("With one update per batch the clip never fires; the loss is ~0 but not its gradient", "05",
          "ratio 1 on every token; gradient equals REINFORCE with a baseline", "clip share 0 at mu = 1, > 0 with reuse"),
    Claim("PPO's clip cuts out-of-range tokens' gradient; CISPO keeps it", "05", "which tokens each loss zeroes",
          "mechanism only"),
    Claim("The KL term is what holds a policy off a reward loophole", "07", "the loophole verifier scores a hack 1",
          Paired("reward_hacking", "beta=2", "beta=0", "final:rewards/loophole/mean", -1), "reward_hacking"),
    Claim("A critic (PPO) buys pass@1 over a group baseline (GRPO) at equal samples", "04", "GAE telescopes to "
          "Monte Carlo at lambda = 1, exactly", Paired("ppo_vs_grpo", "ppo", "grpo", "change:eval/greedy/pass@1"),
          "ppo_vs_grpo"),
    Claim("Finer credit (VinePPO) beats uniform credit at equal sampled tokens", "09", "credit sums to reward "
          "minus V(prompt), exactly", Paired("credit_race", "vineppo", "grpo", "change:eval/greedy/pass@1"),
          "credit_race"),
    Claim("Several updates per batch collapse entropy", "06", "thermostat rule checked step by step",
          None, "updates_collapse"),
    Claim("The entropy thermostat keeps entropy up", "06", "thermostat rule checked step by step",
          Paired("entropy_collapse", "thermostat", "none", "final:entropy",
                 also=("change:eval/sampled/pass@1", "change:eval/sampled/pass@8")), "thermostat"),
    Claim("Clip-higher slows entropy collapse", "05, 06, 10", "releases ratios in (1.2, 1.28] for A > 0 only",
          Paired("entropy_mu4", "clip-higher", "none", "mean:entropy"), "clip_higher_entropy_third"),
    Claim("A small entropy bonus (0.01) keeps entropy up", "06", "loss = pg - 0.01 H, checked per step",
          Paired("entropy_mu4", "bonus 0.01", "none", "mean:entropy", also=("final:entropy",
                                                                            "change:eval/sampled/pass@8")), "bonus"),
    Claim("Large beta slows learning", "06", "k1/k2/k3 bias exactly; k3's gradient weight",
          Paired("beta", "beta=0.04", "beta=0.5", "change:eval/sampled/pass@1"), "beta_slows"),
    Claim("Small beta drifts further from the reference", "06", "exact KL to the starting model",
          Paired("beta", "beta=0", "beta=0.5", "final:eval/kl_to_init"), "beta_drift"),
    Claim("seq-mean-token-mean makes wrong answers longer", "08", "a long wrong token gets 5/24 of a short one's push",
          Paired("length_bias", "seq-mean-token-mean", "token-mean", "mean:completions/mean_length_wrong", 1, 2),
          "length_bias"),
    Claim("Dynamic sampling puts more groups with signal in each update", "10", "keep masks exactly",
          Paired("dynamic_sampling", "grpo+dynamic-sampling", "grpo", "mean:groups_with_signal", 1, 2),
          "dynamic_sampling"),
    Claim("DAPO's clip-higher helps on its own", "10", "releases ratios in (1.2, 1.28] for A > 0 only",
          Paired(_DAPO, "+clip-higher", "grpo", "change:eval/sampled/pass@1"), "dapo_clip_higher"),
    Claim("DAPO's token-level loss helps on its own", "08, 10", "per-token weights exactly",
          Paired(_DAPO, "+token-mean", "grpo", "change:eval/sampled/pass@1"), "dapo_token_mean"),
    Claim("DAPO's overlong filtering helps on its own", "10", "keep masks exactly",
          Paired(_DAPO, "+overlong-filter", "grpo", "change:eval/sampled/pass@1"), "dapo_overlong"),
    Claim("DAPO's dynamic sampling helps on its own", "10", "keep masks exactly",
          Paired(_DAPO, "+dynamic-sampling", "grpo", "change:eval/sampled/pass@1"), "dapo_dynamic"),
    Claim("DAPO as a whole beats GRPO", "10", "each change's mechanism above",
          Paired("dapo_ablation", "dapo", "grpo", "change:eval/sampled/pass@1"), "dapo_whole"),
    Claim("MaxRL keeps pass@k where GRPO trades it for pass@1", "12", "a rare success gets A = 7 vs GRPO's 2.47",
          Paired("maxrl_long", "maxrl", "grpo", "change:eval/sampled/pass@8", also=("change:eval/sampled/pass@1",)),
          "maxrl_pass_k"),
    Claim("Recipes can be ranked by a ScaleRL compute fit", "12", "the fit recovers a known curve; extrapolation flagged",
          Asymptote("maxrl_long", "maxrl", "grpo"), "scalerl_rank"),
    Claim("The Triton kernel matches fp64 in one pass; the chunked path saves memory", "14",
          "log-prob and gradient against fp64 in Triton's interpreter", "memory at V = 151936 measured in the run"),
)


def table_markdown(root=None) -> str:
    """The README's claims block: the decision rule, then the table, every training-level row read from its
    results file and judged under its plan."""
    from rlnb.studies.decide import RULE_MARKDOWN

    rows = [RULE_MARKDOWN, "",
            "| claim | ch | mechanism (exact, fixed batch) | training level: **verdict**: effect [95 % CI], seeds on the "
            "claimed side; comparison, MDE; seeds; evidence |", "|---|---|---|---|"]
    for c in CLAIMS:
        rows.append(f"| {c.text} | {c.chapters} | {c.mechanism} | {describe(c, root)['line']} |")
    return "\n".join(rows)


def race_power(result, spec: str = "final:eval/sampled/pass@1", reference: str = "grpo") -> dict:
    """How many seeds per recipe a race would need to tell each recipe from ``reference`` on ``spec``.

    The seed-to-seed spread is pooled over every recipe (each recipe's variance over its seeds, averaged), the
    gap is each recipe's mean minus the reference's; seeds per recipe for a two-sample comparison at 5 % with
    80 % power: 2 ((1.96 + 0.84) sd / |gap|)^2. Returns ``{"sd": pooled sd, "df": its degrees of freedom,
    "arms": {arm: (gap, seeds needed)}}``, arms sorted from the largest gap."""
    stats = {a: result.value(a, spec) for a in result.arms}
    var = [s.std ** 2 for s in stats.values() if s.n > 1]
    sd = math.sqrt(sum(var) / len(var)) if var else math.nan
    df = sum(s.n - 1 for s in stats.values() if s.n > 1)
    ref = stats[reference].mean
    gaps = {a: s.mean - ref for a, s in stats.items() if a != reference}
    need = {a: (g, math.ceil(2 * (Z_POWER * sd / abs(g)) ** 2) if g else math.inf) for a, g in gaps.items()}
    return {"sd": sd, "df": df, "arms": dict(sorted(need.items(), key=lambda kv: -abs(kv[1][0])))}
