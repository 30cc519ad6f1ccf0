"""The generated parts of docs/studies.md (``scripts/regen_tables.py``): the verdict of every training-level
claim under the rule, the plans, and per attempt its studies' settings, status and numbers, so none can go stale."""

from __future__ import annotations

from rlnb.studies.claims import CLAIMS, describe
from rlnb.studies.results import load_result

SECOND_ATTEMPT = {  # the second attempts and the numbers docs/studies.md tabulates for each
    "entropy_mu4": ("start:entropy", "mean:entropy", "final:entropy", "mean:clip_ratio/region_mean",
                    "mean:clip_ratio/high_mean", "change:eval/sampled/pass@8", "change:eval/sampled/pass@1"),
    "maxrl_long": ("change:eval/sampled/pass@1", "change:eval/sampled/pass@8", "change:eval/sampled/pass@16",
                   "final:entropy", "mean:clip_ratio/region_mean"),
    "dapo_one_at_a_time": ("change:eval/sampled/pass@1", "change:eval/greedy/pass@1", "mean:frac_reward_zero_std",
                           "mean:completions/clipped_ratio", "mean:clip_ratio/high_mean",
                           "mean:completions/mean_length_wrong", "max:step"),
}
_PASS = ("change:eval/sampled/pass@1", "change:eval/sampled/pass@8")
THIRD_ATTEMPT = {  # the third attempts (rlnb.studies.third_attempt) and their numbers
    "entropy_third": ("start:entropy", "change:entropy", "final:entropy", "mean:clip_ratio/high_mean",
                      "mean:clip_ratio/region_mean", *_PASS),
    "cliphigh_third": ("mean:entropy", "change:entropy", "mean:clip_ratio/high_mean", *_PASS),
    "maxrl_third": (*_PASS, "change:eval/sampled/pass@16", "final:entropy"),
    "dapo_third": (*_PASS, "mean:frac_reward_zero_std", "mean:completions/clipped_ratio",
                   "mean:completions/mean_length_wrong", "max:step"),
    "beta_third": ("final:eval/kl_to_init", "change:eval/sampled/pass@1"),
    "length_third": ("mean:completions/mean_length_wrong", "change:eval/sampled/pass@1"),
    "dynsamp_third": ("mean:groups_with_signal", "mean:frac_reward_zero_std", "change:eval/sampled/pass@1"),
    "hacking_third": ("final:rewards/loophole/mean", "final:accuracy"),
    "ppo_third": ("change:eval/greedy/pass@1", "final:eval/greedy/pass@1"),
    "credit_third": ("change:eval/greedy/pass@1", "final:eval/step"),
}


def _seeds_text(seeds: list[int]) -> str:
    """Seeds as a range where they are consecutive: "10-14", else "0, 2, 5"; "none yet" for none.

    >>> _seeds_text([12, 10, 11]), _seeds_text([0, 2]), _seeds_text([])
    ('10-12', '0, 2', 'none yet')
    """
    s = sorted(seeds)
    if not s:
        return "none yet"
    return f"{s[0]}-{s[-1]}" if len(s) > 2 and s == list(range(s[0], s[-1] + 1)) else ", ".join(map(str, s))


def _claims_of(name: str, root=None) -> list[str]:
    from rlnb.studies.decide import load_plans

    plans = load_plans(root)
    return [f"- *{c.text}*: {describe(c, root)['line']}" for c in CLAIMS if c.plan and
            (getattr(c.evidence, "file", None) == name or (c.plan in plans and plans[c.plan][0].file == name))]


def studies_markdown(table=None, root=None) -> str:
    """Per study (default: the second attempts) its setting notes, status, a table of mean ± sd [min, max] over
    seeds, and the verdict of each claim it tests."""
    out = []
    for name, specs in (table or SECOND_ATTEMPT).items():
        try:
            res = load_result(name, root=root)
        except FileNotFoundError:
            out += [f"### `{name}`\n\nNot measured yet (0 runs done).\n", *_claims_of(name, root), ""]
            continue
        cfg = res.config
        secs = sum(r.wall_s + r.eval_s for r in res.runs)
        out.append(f"### `{name}` ({cfg.get('status', '')}, seeds {_seeds_text(res.seeds)}; {secs / 60:.0f} min of one "
                   "shared core, training and evaluation)\n\n"
                   f"**Claims:** {'; '.join(cfg.get('claims', []))}. **Setting and search:** {cfg.get('notes', '')}\n\n"
                   + res.summary(list(specs)).to_markdown() + "\n")
        out += [*_claims_of(name, root), ""]
    return "\n".join(out).rstrip() + "\n"


def verdicts_markdown(root=None) -> str:
    """The rule, then one line per training-level claim: its verdict words, seeds and MDE (the README's table has
    the numbers)."""
    from rlnb.studies.decide import RULE_MARKDOWN

    rows = [RULE_MARKDOWN, "", "| claim | ch | verdict under the rule (generated) | seeds; MDE; when the plan was written |",
            "|---|---|---|---|"]
    for c in CLAIMS:
        if c.plan:
            d = describe(c, root)
            own = d["line"].split("; third attempt")[0]
            n = d["stat"].n if "stat" in d else 0
            when = "plan written after the data" if "plan written after the data" in own else "plan before the data"
            few = " (< 5)" if n < 5 else ""
            rows.append(f"| {c.text} | {c.chapters} | {d['line'].split('; ')[0]} | {n} seeds{few}; MDE "
                        f"{d['plan'].mde:g}; {when} |")
    return "\n".join(rows)


def plans_markdown(root=None) -> str:
    """The plans as written (docs/results/plans.json)."""
    from rlnb.studies.decide import load_plans

    rows = ["| plan | study: comparison | MDE (reason) | pilot: spread of the difference | seeds (power needs) | "
            "activity checks | written |", "|---|---|---|---|---|---|---|"]
    for key, (p, written, commit) in sorted(load_plans(root).items()):
        checks = "; ".join(f"{c.role} {c.spec} {c.op} {c.threshold:g}" for c in p.checks) or "-"
        need = p.power_seeds or "spread unknown"
        rows.append(f"| `{key}` | `{p.file}`: {p.arm} - {p.control}, {p.spec}, sign {p.sign:+d} | {p.mde:g} "
                    f"({p.mde_reason}) | {p.pilot}: {p.pilot_sd:g} | {_seeds_text(list(p.seeds))} ({need}) | {checks} | "
                    f"{written}, {commit[:7]} |")
    return "\n".join(rows)
