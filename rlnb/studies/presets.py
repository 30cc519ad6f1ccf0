"""One ``Study`` per claim of the notebooks: its arms, its settings (full and smoke), and the numbers that
test it. ``rlnb.studies.get(name)`` or the functions below; ``study.run()`` -> ``StudyResult``.

Full settings take a few minutes on two laptop cores and use three seeds (0, 1, 2, fixed before any
measurement); smoke settings (``RLNB_SMOKE=1`` or ``smoke=True``) take seconds and only exercise the
mechanism. What each full setting measured, per seed, is in ``docs/studies.md``; assert only what
held there on every seed.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from rlnb.studies.runner import StudyResult, run_study

SEEDS = (0, 1, 2)
SMOKE = dict(prompts_per_step=4, num_generations=4)
EVAL = dict(eval_n=200, eval_sampled_n=100, eval_k=8)
SMOKE_EVAL = dict(eval_n=16, eval_sampled_n=4, eval_k=8)


def is_smoke(smoke: bool | None = None) -> bool:
    """``smoke`` if given, else whether the environment sets ``RLNB_SMOKE`` to a non-empty, non-0 value."""
    if smoke is not None:
        return bool(smoke)
    return os.environ.get("RLNB_SMOKE", "") not in ("", "0")


@dataclass(frozen=True)
class Study:
    """A claim, the arms that test it, and the settings of ``run_study`` (or of another ``runner``)."""

    name: str
    claim: str
    arms: dict
    settings: dict
    specs: tuple = ("final:reward", "final:entropy")
    smoke: bool = False
    runner: Callable = field(default=run_study, repr=False)

    def run(self, *, arms: list[str] | None = None, seeds=None, progress: bool = True, **overrides):
        """Run the study (optionally only some arms or seeds, e.g. to split it over processes).

        ``overrides`` replace settings for this run only, e.g. a reduced live version in a notebook:
        ``study.run(arms=["none"], seeds=(0, 1), steps=30, eval_n=0)`` (``steps``, ``eval_every``,
        ``eval_n`` ... or any Recipe field shared by all arms)."""
        chosen = {k: v for k, v in self.arms.items() if arms is None or k in arms}
        if not chosen:
            raise ValueError(f"arms: none of {arms!r} is an arm of {self.name!r}; arms: {list(self.arms)}")
        settings = {**self.settings, **({"seeds": seeds} if seeds is not None else {}), **overrides}
        return self.runner(chosen, name=self.name, progress=progress, **settings)

    def describe(self) -> str:
        s = self.settings
        return (f"{self.name}: {self.claim}\n  arms: {list(self.arms)}\n  task={s.get('task')!r}, "
                f"seeds={list(s.get('seeds', ()))}, steps={s.get('steps')}, smoke={self.smoke}")


def _size(smoke: bool, full: dict, small: dict) -> dict:
    return small if smoke else full


def entropy_collapse(*, smoke: bool | None = None) -> Study:
    """Entropy collapses when each batch is reused for several updates at a high learning rate
    (Countdown, 4 mini-batches, lr 2e-4); which countermeasure keeps it up? Clip-higher (DAPO,
    eps_high 0.28), an entropy bonus, and the entropy thermostat (Skywork-OR1: the bonus coefficient
    rises while entropy is below its target)."""
    sm = is_smoke(smoke)
    arms = {
        "none": {},
        "clip-higher": {"eps_high": 0.28},
        "bonus": {"entropy_coef": 0.01},
        "thermostat": {"entropy_target": 0.45, "entropy_coef": 0.0, "entropy_coef_delta": 0.002,
                       "entropy_coef_max": 0.05},
    }
    common = dict(task="countdown", num_mini_batches=4, lr=2e-4)
    size = _size(sm, dict(seeds=SEEDS, steps=50, eval_every=25, **EVAL),
                 dict(seeds=(0,), steps=3, eval_every=0, **SMOKE, **SMOKE_EVAL))
    return Study("entropy_collapse", "several updates per batch at a high lr collapse entropy; countermeasures "
                 "keep it higher", arms, {**common, **size},
                 ("start:entropy", "final:entropy", "change:entropy", "change:eval/sampled/pass@8",
                  "change:eval/greedy/pass@1", "change:eval/sampled/pass@1", "final:clip_ratio/region_mean"), sm)


def beta(*, smoke: bool | None = None) -> Study:
    """The KL coefficient beta: too large slows learning, zero lets the policy drift from the reference.
    Every arm measures the exact KL to its starting model (``kl_to_init``), beta = 0 included."""
    sm = is_smoke(smoke)
    arms = {"beta=0": {"beta": 0.0}, "beta=0.04": {"beta": 0.04}, "beta=0.5": {"beta": 0.5}}
    size = _size(sm, dict(seeds=SEEDS, steps=30, eval_every=15, **EVAL),
                 dict(seeds=(0,), steps=3, eval_every=0, **SMOKE, **SMOKE_EVAL))
    return Study("beta", "large beta slows learning; beta = 0 drifts furthest from the reference", arms,
                 {"task": "add", "kl_to_init": True, **size},
                 ("final:eval/kl_to_init", "change:eval/sampled/pass@1", "change:reward",
                  "change:eval/greedy/pass@1", "final:entropy"), sm)


def length_bias(*, smoke: bool | None = None) -> Study:
    """Aggregation and length: seq-mean-token-mean divides each sequence's loss by its own length, so a
    long wrong answer is pushed down less per token than a short one (Dr. GRPO's length bias);
    token-mean and the constant normaliser of Dr. GRPO do not. Addition with optional scratch work, where
    completions can be 4 or 25 tokens and the reward ignores everything before the last '>'."""
    sm = is_smoke(smoke)
    arms = {"seq-mean-token-mean": {"aggregation": "seq-mean-token-mean"},
            "token-mean": {"aggregation": "token-mean"},
            "seq-mean-token-sum-norm": {"aggregation": "seq-mean-token-sum-norm"}}
    size = _size(sm, dict(seeds=SEEDS, steps=30, eval_every=0, **EVAL),
                 dict(seeds=(0,), steps=3, eval_every=0, **SMOKE, **SMOKE_EVAL))
    return Study("length_bias", "seq-mean-token-mean makes wrong answers longer", arms, {"task": "add", **size},
                 ("start:completions/mean_length_wrong", "mean:completions/mean_length_wrong",
                  "final:completions/mean_length_wrong", "final:completions/mean_length_correct",
                  "change:eval/greedy/pass@1", "change:eval/sampled/pass@1"), sm)


def dynamic_sampling(*, smoke: bool | None = None) -> Study:
    """DAPO's dynamic sampling: drop groups whose rewards are all equal (no signal) and sample fresh ones,
    up to ``max_gen_rounds`` rounds. Measured per step (zero-signal share of the update batch, samples
    drawn) and per sample budget (``match_samples``: both arms sample the same number of completions)."""
    sm = is_smoke(smoke)
    arms = {"grpo": {}, "grpo+dynamic-sampling": {"filters": ("dynamic_sampling",), "max_gen_rounds": 3}}
    size = _size(sm, dict(seeds=SEEDS, steps=30, eval_every=5, **EVAL),
                 dict(seeds=(0,), steps=3, eval_every=0, **SMOKE, **SMOKE_EVAL))
    return Study("dynamic_sampling", "dynamic sampling removes zero-signal groups from the update, at the "
                 "price of more samples per step", arms, {"task": "add", "match_samples": True, **size},
                 ("mean:frac_reward_zero_std", "mean:frac_reward_zero_std_sampled", "mean:gen_rounds",
                  "mean:groups_with_signal", "max:step", "change:eval/greedy/pass@1", "change:eval/sampled/pass@1"), sm)


def dapo_ablation(*, smoke: bool | None = None) -> Study:
    """DAPO's four changes one at a time on top of GRPO, and all four (the ``dapo`` recipe), on the same
    sample budget. Two mini-batches per batch for every arm (with one, the ratio is 1 and clip-higher
    cannot act); 40 new tokens so that DAPO's overlong ramp (last 8 tokens) does not hit ordinary
    scratch-work answers (up to 26 tokens)."""
    sm = is_smoke(smoke)
    arms = {
        "grpo": {},
        "+clip-higher": {"eps_high": 0.28},
        "+token-mean": {"aggregation": "token-mean"},
        "+overlong": {"overlong_buffer": 8, "filters": ("overlong",)},
        "+dynamic-sampling": {"filters": ("dynamic_sampling",), "max_gen_rounds": 3},
        "dapo": {"recipe": "dapo"},
    }
    common = dict(task="add", num_mini_batches=2, max_new_tokens=40, match_samples=True)
    size = _size(sm, dict(seeds=SEEDS, steps=30, eval_every=15, **EVAL),
                 dict(seeds=(0,), steps=2, eval_every=0, **SMOKE, **SMOKE_EVAL))
    return Study("dapo_ablation", "DAPO vs each of its four changes alone", arms, {**common, **size},
                 ("change:eval/greedy/pass@1", "change:eval/sampled/pass@1", "final:entropy",
                  "final:completions/mean_length"), sm)


def maxrl_vs_grpo(*, smoke: bool | None = None) -> Study:
    """MaxRL's advantage (r - mean) / mean weighs a rare success by 1/p, which targets pass@k; GRPO's
    weighs it by (1 - p)/std. After training: sampled pass@1 and pass@8 on held-out prompts."""
    sm = is_smoke(smoke)
    arms = {"grpo": {"recipe": "grpo"}, "maxrl": {"recipe": "maxrl"}}
    size = _size(sm, dict(seeds=SEEDS, steps=40, eval_every=20, **EVAL),
                 dict(seeds=(0,), steps=3, eval_every=0, **SMOKE, **SMOKE_EVAL))
    return Study("maxrl_vs_grpo", "MaxRL keeps pass@k higher than GRPO for a similar pass@1", arms,
                 {"task": "add", **size},
                 ("change:eval/sampled/pass@1", "change:eval/sampled/pass@8", "change:eval/greedy/pass@1",
                  "final:entropy"), sm)


def zoo_race(*, smoke: bool | None = None, recipes: list[str] | None = None) -> Study:
    """Every recipe on the same seeds and the same number of sampled completions (``match_samples``):
    reward and held-out pass@1 against samples. ``scripts/bench_recipes.py`` runs the bigger version."""
    from rlnb import recipes as recipes_mod

    sm = is_smoke(smoke)
    names = recipes or recipes_mod.names()
    arms = {n: {"recipe": n} for n in names}
    size = _size(sm, dict(seeds=(0,), steps=30, eval_every=10, prompts_per_step=8, eval_n=200, eval_sampled_n=0),
                 dict(seeds=(0,), steps=2, eval_every=0, **SMOKE, eval_n=16, eval_sampled_n=0))
    return Study("zoo_race", "recipes differ in how fast they turn samples into held-out pass@1", arms,
                 {"task": "add", "match_samples": True, **size},
                 ("change:eval/greedy/pass@1", "final:reward", "final:entropy", "final:wall_s"), sm)


def group_size(*, smoke: bool | None = None) -> Study:
    """Group size G, at the mechanism level: from M samples per prompt cut into groups of G, the share
    of zero-signal groups (all right or all wrong) against its prediction mean_i p_i^G + (1 - p_i)^G, the
    RMS error of the group-mean baseline, and the seconds one training step takes at each G."""
    from rlnb.studies.group_size import group_size_study

    sm = is_smoke(smoke)
    size = _size(sm, dict(task="countdown", G_values=(2, 4, 8, 16), n_prompts=64, samples_per_prompt=32,
                          timing_steps=2, prompts_per_step=16, seeds=(0,)),
                 dict(task="countdown", G_values=(2, 4, 8), n_prompts=8, samples_per_prompt=8,
                      timing_steps=1, prompts_per_step=4, seeds=(0,)))
    return Study("group_size", "larger G: fewer zero-signal groups, a less noisy baseline, a costlier step",
                 {"G": {}}, size, (), sm, runner=lambda arms, **kw: group_size_study(**kw))


def reward_hacking(*, smoke: bool | None = None) -> Study:
    """Chapter 07: GRPO on the broken verifier ``add_loophole`` at beta 0, 0.5 and 2. Per step: the reward (what the
    broken verifier pays), ``accuracy`` (the honest part), ``rewards/loophole/mean`` (completions paid only through
    the hole) and the k3 ``kl``. (Was ``scripts/reward_hacking.py``'s own format; the shipped file was converted.)"""
    sm = is_smoke(smoke)
    arms = {f"beta={b:g}": {"beta": b} for b in (0.0, 0.5, 2.0)}
    size = _size(sm, dict(seeds=SEEDS, steps=40), dict(seeds=(0,), steps=3, **SMOKE))
    return Study("reward_hacking", "at beta 0 the policy moves to the loophole; a larger beta holds it", arms,
                 {"task": "add_loophole", **size},
                 ("final:rewards/loophole/mean", "max:rewards/loophole/mean", "final:accuracy", "final:kl"), sm)


def ppo_vs_grpo(*, smoke: bool | None = None) -> Study:
    """Chapter 04: PPO with a critic vs GRPO at equal samples (the same P and G for the same steps), each recipe with
    its own other settings; held-out greedy pass@1 on 100 prompts every 10 steps, and the training time."""
    sm = is_smoke(smoke)
    arms = {"ppo": {"recipe": "ppo"}, "grpo": {"recipe": "grpo"}}
    size = _size(sm, dict(seeds=SEEDS, steps=30, eval_every=10, eval_n=100, prompts_per_step=8, num_generations=8),
                 dict(seeds=(0,), steps=2, eval_every=1, eval_n=4, **SMOKE))
    return Study("ppo_vs_grpo", "at equal samples on the toy, the critic buys no measurable pass@1", arms,
                 {"task": "add", **size}, ("final:eval/greedy/pass@1", "change:eval/greedy/pass@1", "final:reward"), sm)


def credit_race(*, smoke: bool | None = None) -> Study:
    """Chapter 09: VinePPO's Monte-Carlo per-token credit vs GRPO's uniform credit at equal sampled tokens (the
    continuations count). GRPO runs its toy recipe; VinePPO the same with K = 4 continuations per prefix and a
    smaller batch (P = 4 x G = 4) so that it gets more than a handful of steps. No warm-up in either arm (VinePPO's
    whole run is about as long as the 10-step warm-up). Greedy pass@1 on 100 held-out prompts every sixth of the
    budget."""
    sm = is_smoke(smoke)
    K, budget = (2, 600) if sm else (4, 100_000)
    vine = {"advantage": "vineppo", "mc_rollouts": K, "prompts_per_step": 4, "num_generations": 4}
    arms = {"grpo": {"warmup_steps": 0}, "vineppo": {"warmup_steps": 0, **vine}}
    size = _size(sm, dict(seeds=SEEDS, eval_n=100), dict(seeds=(0,), eval_n=4, **SMOKE))
    return Study("credit_race", "finer credit (VinePPO) vs uniform credit at equal sampled tokens", arms,
                 {"task": "add", "tokens": budget, "eval_every": budget / 6, **size},
                 ("final:eval/greedy/pass@1", "change:eval/greedy/pass@1", "final:eval/step", "final:eval/tokens"), sm)


def entropy_clip(*, smoke: bool | None = None) -> Study:
    """Chapter 06: entropy collapses with the clip on and mu = 1 (one optimizer step per batch), where the clip never
    fires: GRPO's clip 0.2, a four times tighter clip, and the clip with the entropy thermostat (Skywork-OR1)."""
    sm = is_smoke(smoke)
    arms = {"clip 0.2": {}, "clip 0.05": {"eps_low": 0.05, "eps_high": 0.05},
            "thermostat": {"entropy_target": 0.5, "entropy_coef": 0.0, "entropy_coef_delta": 0.005,
                           "entropy_coef_max": 0.05}}
    common = dict(task="countdown", lr=3e-4, warmup_steps=0, num_iterations=1, num_mini_batches=1)
    size = _size(sm, dict(seeds=SEEDS, steps=30), dict(seeds=(0,), steps=3, **SMOKE))
    return Study("entropy_clip", "the clip does not hold entropy up when it never fires", arms, {**common, **size},
                 ("start:entropy", "final:entropy", "max:clip_ratio/region_mean"), sm)


PRESETS = {f.__name__: f for f in (entropy_collapse, beta, length_bias, dynamic_sampling, dapo_ablation,
                                   maxrl_vs_grpo, zoo_race, group_size, reward_hacking, ppo_vs_grpo, credit_race,
                                   entropy_clip)}


def names() -> list[str]:
    return list(PRESETS)


def get(name: str, *, smoke: bool | None = None) -> Study:
    """The preset called ``name`` (full, or smoke when ``smoke`` or ``RLNB_SMOKE`` says so)."""
    if name not in PRESETS:
        raise KeyError(f"study: unknown study {name!r}; known: {names()}")
    return PRESETS[name](smoke=smoke)


__all__ = ["PRESETS", "Study", "StudyResult", "get", "is_smoke", "names", *PRESETS]
