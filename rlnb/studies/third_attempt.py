"""The third, designed attempts (issue 38): settings chosen from pilots so that each mechanism acts, and every
training-level claim re-run under one decision rule (``rlnb.studies.decide``) whose plans were written first.

Pilots run on seeds 100+ (never a measured seed) into ``docs/results/pilots/``: they choose the setting (is the
mechanism active there?) and give the spread the power calculation uses. The measured studies run on seeds
10, 11, ... (as many as their plans need), so that neither the pilots nor the earlier attempts (seeds 0-4) are
reused as evidence. A study refuses to run without a plan for each of its claims (``docs/results/plans.json``).

    PYTHONPATH=. nice -n 15 python scripts/claim_studies.py --resume               # the queue, resumable
    PYTHONPATH=. python scripts/claim_studies.py entropy_third --fresh --out /tmp/x  # one study from scratch
"""

from __future__ import annotations

from pathlib import Path

from rlnb.studies.results import results_dir

PILOT_SEEDS = (100, 101)
_DAPO_SET = dict(task="add", max_new_tokens=24, match_samples=True, eval_every=0, eval_n=100, eval_sampled_n=64,
                 eval_k=8)
# entropy_third's setting, shared by cliphigh_third (whose pilot was entropy_third): Countdown, 4 x 4 reuse
_ENTROPY_SET = dict(task="countdown", num_iterations=4, num_mini_batches=4, lr=1e-4, steps=30, eval_every=0,
                    eval_n=100, eval_sampled_n=64, eval_k=8)
_THERMOSTAT = {"entropy_target": 0.45, "entropy_coef": 0.0, "entropy_coef_delta": 0.002, "entropy_coef_max": 0.05}

PILOTS: dict[str, dict] = {
    "pilot_dapo_reuse": dict(
        claims=["DAPO's clip-higher helps on its own (does the upper clip fire?)"],
        arms={"grpo": {}, "+clip-higher": {"eps_high": 0.28}},
        setting=dict(**_DAPO_SET, num_iterations=4, num_mini_batches=4, lr=1e-4, steps=12),
        primary="change:eval/sampled/pass@1", control="grpo",
        notes="dapo_one_at_a_time's setting (add, L_max 24, 12 steps' samples) with mu = 4 epochs x 4 mini-batches "
              "instead of 1 x 4, so the ratio can pass 1.2: does GRPO's upper clip fire on >= 1 % of tokens?"),
    "pilot_entropy_updates": dict(
        claims=["several updates per batch collapse entropy (single-update arm)"],
        arms={"mu=1": {"num_iterations": 1, "num_mini_batches": 1},
              "mu=4x4": {"num_iterations": 4, "num_mini_batches": 4}},
        setting=dict(task="countdown", lr=1e-4, steps=15, eval_every=0, eval_n=0, eval_sampled_n=0),
        primary="change:entropy", control="mu=1",
        notes="entropy_mu4's setting (Countdown, lr 1e-4) with one update per batch against 4 epochs x 4 "
              "mini-batches, 15 steps: the paired entropy change and its spread."),
    "pilot_dapo_clip": dict(
        claims=["DAPO's clip-higher helps on its own (which setting makes GRPO's upper clip fire?)"],
        arms={"grpo lr 2e-4": {"lr": 2e-4}, "grpo eps 0.1": {"eps_low": 0.1, "eps_high": 0.1}},
        setting=dict(**_DAPO_SET, num_iterations=4, num_mini_batches=4, lr=1e-4, steps=12),
        primary="mean:clip_ratio/high_mean", control="grpo lr 2e-4",
        notes="pilot_dapo_reuse's grpo clipped 0.3 % of tokens high at lr 1e-4: a larger lr, or a narrower clip "
              "(eps 0.1) whose upper side clip-higher then widens."),
}


def _preset(name: str, arms: list[str] | None = None, claims=(), primary="", control="", notes="") -> dict:
    """An older study (``rlnb.studies.presets``) as a queue entry: its arms (or some) and settings, seeds from plans."""
    from rlnb.studies.presets import get

    st = get(name, smoke=False)
    setting = {k: v for k, v in st.settings.items() if k != "seeds"}
    chosen = {a: v for a, v in st.arms.items() if arms is None or a in arms}
    return dict(claims=list(claims), arms=chosen, setting=setting, primary=primary, control=control,
                notes=notes or f"the study {name!r} as shipped (rlnb.studies.presets), on new seeds")


def studies() -> dict[str, dict]:
    """The measured third attempts, in queue order (the settings the pilots chose; see docs/studies.md)."""
    from rlnb.studies import second_attempt

    return {
        "entropy_third": dict(
            claims=["several updates per batch collapse entropy", "the entropy thermostat keeps entropy up",
                    "DAPO's clip-higher helps on its own (here, where GRPO's upper clip fires on 1.8 % of tokens)"],
            arms={"mu=1": {"num_iterations": 1, "num_mini_batches": 1}, "none": {}, "thermostat": _THERMOSTAT,
                  "clip-higher": {"eps_high": 0.28}},
            setting=dict(_ENTROPY_SET), primary="change:entropy", control="mu=1",
            notes="entropy_mu4's setting (Countdown, 4 epochs x 4 mini-batches, lr 1e-4, 30 steps; the clip fires "
                  "on 5-15 % of tokens) with a single-update arm (mu = 1, one mini-batch) as the control of "
                  "'several updates collapse entropy', the thermostat of entropy_collapse (target 0.45), and "
                  "DAPO's clip-higher (eps_high 0.28): on `add` no pilot setting made GRPO's upper clip fire on "
                  "1 % of tokens (0.3 % at 4 x 4 reuse, 0.2 % at lr 2e-4, 0.5 % at eps 0.1; docs/results/pilots), "
                  "on Countdown at 4 x 4 it fires on 1.8 % (entropy_mu4)."),
        "cliphigh_third": dict(
            claims=["clip-higher slows entropy collapse (on seeds 40+, outside entropy_third's, which piloted it)"],
            arms={"none": {}, "clip-higher": {"eps_high": 0.28}},
            setting=dict(_ENTROPY_SET), primary="mean:entropy", control="none",  # the pilot's setting, exactly
            notes="entropy_third's setting, where entropy collapses and GRPO's upper clip fires on 1.8 % of tokens "
                  "(so clip-higher has tokens to release), on seeds 40+: entropy_third's own seeds 10-15 were its "
                  "pilot. The earlier 5-seed null (entropy_mu4) was measured before its plan."),
        "maxrl_third": dict(
            claims=["MaxRL keeps pass@k where GRPO trades it for pass@1", "recipes can be ranked by a ScaleRL fit"],
            arms={"grpo": {"recipe": "grpo"}, "maxrl": {"recipe": "maxrl"}},
            setting={**second_attempt.STUDIES["maxrl_long"]["setting"], "eval_every": 5},  # 9 points per run
            primary="change:eval/sampled/pass@8", control="grpo",
            notes="maxrl_long's setting with an evaluation every 5 steps (9 points per run for ScaleRL's "
                  "three-parameter fit) and the seeds the plan's power needs; GRPO's own pass@8 drop is checked "
                  "first (the rule, on the grpo arm alone)."),
        "dapo_third": dict(
            claims=["DAPO's token-mean, overlong filtering and dynamic sampling each help on their own",
                    "DAPO as a whole beats GRPO"],
            arms={"grpo": {}, "+token-mean": {"aggregation": "token-mean"},
                  "+overlong-filter": {"filters": ("overlong",)},
                  "+dynamic-sampling": {"filters": ("dynamic_sampling",), "max_gen_rounds": 3},
                  "dapo": {"recipe": "dapo"}},
            setting=dict(**_DAPO_SET, num_mini_batches=4, lr=1e-4, steps=12),
            primary="change:eval/sampled/pass@1", control="grpo",
            notes="dapo_one_at_a_time's setting (add, L_max = 24: a third of samples truncated, 0.7-0.9 of groups "
                  "without signal in the pilots) on new seeds, as many as the plans' power needs, with DAPO as a "
                  "whole (the recipe, same L_max) as a fifth arm. Clip-higher is measured on Countdown "
                  "(entropy_third): on `add` its mechanism has nothing to act on."),
        "beta_third": _preset("beta", claims=["large beta slows learning", "small beta drifts further"]),
        "length_third": _preset("length_bias", ["seq-mean-token-mean", "token-mean"],
                                claims=["seq-mean-token-mean makes wrong answers longer"]),
        "dynsamp_third": _preset("dynamic_sampling", claims=["dynamic sampling puts more groups with signal"]),
        "hacking_third": _preset("reward_hacking", ["beta=0", "beta=2"], claims=["the KL term holds off a loophole"]),
        "ppo_third": _preset("ppo_vs_grpo", claims=["a critic buys pass@1 over a group baseline"]),
        "credit_third": _preset("credit_race", claims=["finer credit beats uniform credit"]),
    }


def pilot_dir(root=None) -> Path:
    return (Path(root) if root else results_dir()) / "pilots"


def run_pilots(names=None, seeds=PILOT_SEEDS, root=None) -> None:
    """The pilots, seed-major and resumable (a saved run of the same setting is kept)."""
    from rlnb.studies.second_attempt import run

    out = pilot_dir(root)
    out.mkdir(parents=True, exist_ok=True)
    run(list(names or PILOTS), tuple(seeds), out=out, studies=PILOTS)


def planned_seeds(name: str, root=None) -> tuple[int, ...]:
    """The seeds the plans of study ``name`` fixed; a study without a plan refuses to run."""
    from rlnb.studies.decide import load_plans

    plans = [p for p, _, _ in load_plans(root).values() if p.file == name]
    if not plans:
        raise ValueError(f"study: {name!r} has no plan in docs/results/plans.json; a claim is not measured "
                         "without a plan written first (rlnb.studies.planned.make_plans, decide.write_plans)")
    return tuple(sorted({s for p in plans for s in p.seeds}))


def run_third(names=None, *, out=None, resume: bool = False, smoke: bool = False, log=print) -> dict:
    """The third attempts as one queue (``second_attempt.run_queue``), each study on the seeds its plans fixed."""
    from rlnb.studies.second_attempt import run_queue

    table = studies()
    names = list(names or table)
    return run_queue(table, {n: planned_seeds(n) for n in names}, out=out, resume=resume, smoke=smoke, log=log)
