"""Recipe -> TRL ``GRPOConfig`` fields, with everything TRL cannot say listed, never silently dropped.

This module is pure (it does not import ``trl``): ``trl_mapping(recipe)`` returns the config's keyword
arguments and three lists. ``unsupported``: recipe settings TRL cannot express; the TRL run does
something else there, and the entry says what. ``differences``: settings TRL expresses with another
convention, so the numbers differ slightly. ``notes``: conversions made on the way (e.g. CISPO's cap).
The tables below are the one place that knows which rlnb registry entry is which TRL option; they
were read off TRL 1.16 (``trl/trainer/grpo_trainer.py``, ``_compute_loss`` and the advantage code in
``_generate_and_score_completions``), and ``tests/test_export_trl_loss.py`` checks the losses against
TRL's own code.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from rlnb import recipes as recipes_mod
from rlnb.algos.resolve import inert_knobs
from rlnb.core.knobs import UNSET
from rlnb.recipe import Recipe

TRL_STD_EPS = 1e-4  # TRL divides by (std + 1e-4), a constant in its code; rlnb's default eps is 1e-6

# rlnb advantage -> TRL scale_rewards (TRL always subtracts the group mean; the std is Bessel-corrected)
SCALE_REWARDS = {"grpo": "group", "dr_grpo": "none", "reinforce_baseline": "none", "batch_norm": "batch"}
STD_ADVANTAGES = {"grpo", "batch_norm"}  # the ones whose eps and unbiased matter
# rlnb advantage -> TRL multi_objective_aggregation (GDPO: each reward function normalised in its group first)
MULTI_OBJECTIVE = {"gdpo": "normalize_then_sum"}

# (rlnb policy loss, aggregation) -> (TRL loss_type, importance_sampling_level). TRL's loss_type fixes the
# aggregation: grpo/sapo = seq-mean-token-mean, dapo/cispo = token-mean over the generation batch,
# dr_grpo = seq-mean-token-sum / max_completion_length, luspo = seq-mean-token-sum.
LOSS_TYPES = {
    ("ppo_clip", "seq-mean-token-mean"): ("grpo", "token"),
    ("ppo_clip", "token-mean"): ("dapo", "token"),
    ("ppo_clip", "seq-mean-token-sum-norm"): ("dr_grpo", "token"),
    ("ppo_clip", "seq-mean-token-sum"): ("luspo", "token"),
    ("cispo", "token-mean"): ("cispo", "token"),
    ("gspo", "seq-mean-token-mean"): ("grpo", "sequence"),
    ("gspo", "seq-mean-token-sum"): ("luspo", "sequence"),
    ("sapo", "seq-mean-token-mean"): ("sapo", "token"),
    ("vespo", "token-mean"): ("vespo", "token"),
}
# rlnb rollout correction -> TRL vllm_importance_sampling_mode (TRL applies it only when it samples with vLLM)
IS_MODES = {"token_truncate", "token_mask", "sequence_truncate", "sequence_mask"}
SEQ_MEAN_LOSS_TYPES = {"grpo", "dr_grpo", "luspo", "sapo"}  # divide by all rows, masked ones included

CRITIC_FIELDS = ("gamma", "lam", "whiten_advantages", "vf_coef", "cliprange_value")


@dataclass(frozen=True)
class Gap:
    """One recipe setting TRL cannot express (or expresses differently), and what happens instead."""

    field: str
    value: object
    why: str

    def __str__(self) -> str:
        return f"{self.field}={self.value!r}: {self.why}"


@dataclass
class TRLMapping:
    kwargs: dict                         # GRPOConfig keyword arguments
    reward_weights: dict[str, float]     # reward function name -> weight, in the order of the functions
    unsupported: list[Gap] = field(default_factory=list)
    differences: list[Gap] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    matched: Recipe | None = None        # the recipe moved to TRL's conventions where rlnb can follow

    def report(self) -> str:
        """Plain text: TRL's loss settings, then every gap between the rlnb recipe and the TRL run."""
        keys = ("loss_type", "importance_sampling_level", "scale_rewards", "epsilon", "epsilon_high", "beta")
        parts = ["GRPOConfig(" + ", ".join(f"{k}={self.kwargs[k]!r}" for k in keys if k in self.kwargs) + ")"]
        for title, items in (("not expressible in TRL (the TRL run differs here)", self.unsupported),
                             ("expressed with another convention", self.differences), ("notes", self.notes)):
            parts.append(f"{title}:" + (" none" if not items else "".join(f"\n  - {x}" for x in items)))
        return "\n".join(parts)


# --- one function per topic; each returns the kwargs it sets and appends its gaps to ``m`` ---------------
# Knobs with a TRL name whose value needs a rule below; every other knob with a TRL name is copied as is.
CONVERTED = {"format_weight", "advantage", "loss", "aggregation", "eps_low", "eps_high", "dual_clip_c",
             "cispo_cap", "tau_pos", "tau_neg", "beta", "entropy_target", "entropy_coef_delta",
             "entropy_coef_max", "num_mini_batches", "vespo_k_pos", "vespo_lambda_pos", "vespo_k_neg",
             "vespo_lambda_neg", "rollout_is_min", "rollout_is_max", "off_policy_mask_threshold"}
# Knobs without a TRL name whose gap needs a rule below (every other one is a gap when not at its "off")
RULED = {"name", "paper", "prompts_per_step", "filters", "overlong_buffer", "unbiased", "eps", "batch_std_centred",
         "dppo_delta", "dppo_cap", "kl_estimator", "kl_horizon", "critic", "entropy_aggregation", "rollout_correction",
         *CRITIC_FIELDS}


def _direct(r: Recipe, m: TRLMapping) -> None:
    """Knobs declared with a TRL name and no conversion: copied; knobs TRL lacks: a gap when switched on,
    with the declaration's reason."""
    inert = inert_knobs(r)  # a knob declared to act only in some settings (acts=) is no gap outside them
    for name, k in Recipe.knobs().items():
        value = getattr(r, name)
        if k.trl and name not in CONVERTED:
            m.kwargs[k.trl] = value
        elif not k.trl and name not in RULED and value is not UNSET and value != k.off and not (k.acts and name in inert):
            m.unsupported.append(Gap(name, value, k.no_trl))  # an UNSET entry knob: its entry's gap says it


def _rewards(r: Recipe, m: TRLMapping) -> None:
    m.reward_weights = {"correct": 1.0, "format": r.format_weight}
    if r.overlong_buffer:
        m.reward_weights["overlong"] = 1.0
        m.notes.append(f"overlong_buffer={r.overlong_buffer}: DAPO's soft overlong penalty is passed as an extra "
                       "reward function 'overlong' (rlnb's own formula, lengths counted with EOS as TRL does)")
    m.kwargs["mask_truncated_completions"] = "overlong" in r.filters   # DAPO's overlong filtering
    for name in r.filters:
        if name != "overlong":
            m.unsupported.append(Gap("filters", name, "TRL has no such filter: those groups stay in the loss "
                                     "(zero advantage, but their tokens still count in the normaliser)"))


def _advantage(r: Recipe, m: TRLMapping) -> None:
    if r.critic:  # GAE from a value head replaces the group estimator altogether
        m.unsupported.append(Gap("critic", True, "PPO with a value head is TRL's PPOTrainer, not GRPOTrainer; "
                                 "the TRL run uses group advantages (scale_rewards='group')"))
        m.kwargs["scale_rewards"] = "group"
        return
    if r.advantage in MULTI_OBJECTIVE:
        m.kwargs.update(multi_objective_aggregation=MULTI_OBJECTIVE[r.advantage], scale_rewards="group")
        m.differences.append(Gap("advantage", r.advantage, "TRL divides each reward function by (its group std + "
                                 "1e-4) and the weighted sum by (its std over the batch's completions + 1e-4); "
                                 "rlnb (as verl) uses eps for the first and whitens the sum over the batch's valid "
                                 "tokens with sqrt(var + 1e-8)"))
        return
    if r.advantage not in SCALE_REWARDS:
        m.unsupported.append(Gap("advantage", r.advantage, "TRL's GRPOTrainer only has (r - group mean) "
                                 "optionally over the group or batch std; the TRL run uses scale_rewards='group'"))
        m.kwargs["scale_rewards"] = "group"
        return
    m.kwargs["scale_rewards"] = SCALE_REWARDS[r.advantage]
    hp, why = r.hyperparameters()["advantage"], {n: k.no_trl for n, k in Recipe.knobs().items()}
    if hp.get("batch_std_centred"):
        m.unsupported.append(Gap("batch_std_centred", True, why["batch_std_centred"]))
    if r.advantage in STD_ADVANTAGES:
        if not hp["unbiased"]:
            m.differences.append(Gap("unbiased", False, why["unbiased"]))
        if hp["eps"] != TRL_STD_EPS:
            m.differences.append(Gap("eps", hp["eps"], why["eps"]))


def _clip(hp: dict, m: TRLMapping) -> None:
    m.kwargs.update(epsilon=hp["eps_low"], epsilon_high=hp["eps_high"])
    c = hp.get("dual_clip_c")
    if c is not None:
        if c > 1 + hp["eps_high"]:  # then TRL's two-sided clip min(rho, delta) is the same loss
            m.kwargs["delta"] = c
            m.notes.append(f"dual_clip_c={c} -> delta: TRL's two-sided clipping (INTELLECT-2) caps "
                           "the ratio at delta, the same loss and gradient as dual-clip when delta > 1 + eps_high")
        else:
            m.unsupported.append(Gap("dual_clip_c", c, "TRL's delta equals dual-clip only above 1 + eps_high"))


def _cispo(hp: dict, m: TRLMapping) -> None:
    cap = hp["cispo_cap"] if hp["cispo_cap"] is not None else 1 + hp["eps_high"]
    m.kwargs["epsilon_high"] = cap
    m.notes.append(f"cispo: TRL's epsilon_high is the absolute cap on the IS weight; rlnb's cap is "
                   f"{'cispo_cap' if hp['cispo_cap'] is not None else '1 + eps_high'} = {cap:g}")
    if hp["eps_low"] < 1:
        m.unsupported.append(Gap("eps_low", hp["eps_low"], "TRL's cispo has no lower truncation of the IS weight "
                                 f"(rlnb truncates at 1 - eps_low = {1 - hp['eps_low']:g})"))


def _sapo(hp: dict, m: TRLMapping) -> None:
    m.kwargs.update(sapo_temperature_pos=hp["tau_pos"], sapo_temperature_neg=hp["tau_neg"])


def _vespo(hp: dict, m: TRLMapping) -> None:
    m.kwargs.update({k: hp[k] for k in ("vespo_k_pos", "vespo_lambda_pos", "vespo_k_neg", "vespo_lambda_neg")})


LOSS_FIELDS = {"ppo_clip": _clip, "gspo": _clip, "cispo": _cispo, "sapo": _sapo, "vespo": _vespo}


def _loss(r: Recipe, m: TRLMapping) -> None:
    key = (r.loss, r.aggregation)
    if key not in LOSS_TYPES:  # the nearest TRL loss: this loss with its own aggregation, else PPO clip
        same_loss = [k for k in LOSS_TYPES if k[0] == r.loss]
        key = same_loss[0] if same_loss else ("ppo_clip", r.aggregation)
        key = key if key in LOSS_TYPES else ("ppo_clip", "token-mean")
        what = "aggregation" if same_loss else "loss"
        m.unsupported.append(Gap(what, getattr(r, what), f"TRL has no ({r.loss}, {r.aggregation}) loss; the TRL "
                                 f"run uses loss_type={LOSS_TYPES[key][0]!r} ({key[0]}, {key[1]})"))
    m.kwargs["loss_type"], m.kwargs["importance_sampling_level"] = LOSS_TYPES[key]
    # the TRL loss's knobs, as the rlnb entry of that name would run them under this recipe
    LOSS_FIELDS[key[0]](r.replace(loss=key[0]).hyperparameters()["loss"], m)


def _kl_entropy(r: Recipe, m: TRLMapping) -> None:
    m.kwargs["beta"] = 0.0 if r.kl_in_reward else r.beta  # use_bias_correction_kl is copied (same name, same rule)
    if not r.kl_in_reward and r.beta > 0 and r.kl_estimator != "k3":
        m.unsupported.append(Gap("kl_estimator", r.kl_estimator, Recipe.knobs()["kl_estimator"].no_trl))
    if r.entropy_target is not None:
        m.kwargs.update(use_adaptive_entropy=True, entropy_target=r.entropy_target, entropy_coef_min=0.0,
                        entropy_coef_delta=r.entropy_coef_delta, entropy_coef_max=r.entropy_coef_max)
        m.differences.append(Gap("entropy_target", r.entropy_target, "TRL applies the coefficient only while "
                                 "the entropy is at or below the target (gated); rlnb's thermostat always applies it"))
    bonus = r.entropy_coef or r.entropy_target is not None
    if bonus and r.entropy_aggregation != "pushed-token-mean" and (r.aggregation != "token-mean"
                                                                    or r.top_entropy_quantile < 1):
        m.unsupported.append(Gap("entropy_aggregation", r.entropy_aggregation, "TRL's entropy bonus is always the "
                                 "token mean over the tokens the policy gradient reaches (sum H m E / sum m E, "
                                 f"'pushed-token-mean'); rlnb here aggregates it like the loss ({r.aggregation}) "
                                 "over every valid token"))


def _correction(r: Recipe, m: TRLMapping) -> None:
    """Rollout correction: TRL's vLLM importance sampling (one mode) and its off-policy sequence mask."""
    hp = r.hyperparameters()["correction"]
    modes = [n for n in r.rollout_correction if n in IS_MODES]
    m.kwargs["vllm_importance_sampling_correction"] = bool(modes)  # off unless the recipe corrects: the same run
    if modes:
        m.kwargs.update(vllm_importance_sampling_mode=modes[0], vllm_importance_sampling_clip_min=hp["rollout_is_min"],
                        vllm_importance_sampling_clip_max=hp["rollout_is_max"])
        m.notes.append(f"rollout_correction={modes[0]!r}: TRL applies it only when it samples with vLLM "
                       "(use_vllm=True), against vLLM's log-probs; rlnb against its own sampler's")
    if "off_policy_mask" in r.rollout_correction:
        m.kwargs["off_policy_mask_threshold"] = hp["off_policy_mask_threshold"]
    for name in r.rollout_correction:
        if name in modes[1:] or (name not in IS_MODES and name != "off_policy_mask"):
            why = ("TRL applies one vllm_importance_sampling_mode" if name in IS_MODES
                   else "TRL has no divergence-based rejection (verl's rollout_rs)")
            m.unsupported.append(Gap("rollout_correction", name, why))


def _optimisation(r: Recipe, m: TRLMapping) -> None:
    m.kwargs["lr_scheduler_type"] = "constant_with_warmup"
    if r.warmup_steps:
        m.differences.append(Gap("warmup_steps", r.warmup_steps, "the warm-up ramps lr k/W in TRL (first step "
                                 "at lr 0) and (k+1)/W in rlnb: one optimizer step apart"))
    if r.num_mini_batches > 1:
        m.notes.append("num_mini_batches -> steps_per_generation; TRL splits shuffled rows, rlnb whole groups")
        if m.kwargs.get("loss_type") in ("dapo", "cispo"):
            m.differences.append(Gap("num_mini_batches", r.num_mini_batches, "TRL's token-mean divides each "
                                     "mini-batch by the batch's mean tokens per mini-batch, rlnb by its own count"))
    if "overlong" in r.filters and m.kwargs.get("loss_type") in SEQ_MEAN_LOSS_TYPES:
        m.differences.append(Gap("filters", "overlong", f"TRL's {m.kwargs['loss_type']} loss averages over every "
                                 "row, masked truncated ones included; rlnb over the kept rows"))


TOPICS = (_direct, _rewards, _advantage, _loss, _kl_entropy, _correction, _optimisation)


def batch_geometry(r: Recipe, *, num_processes: int = 1, gradient_accumulation_steps: int = 1) -> dict:
    """One rlnb step (P * G completions, ``num_mini_batches`` optimizer steps) as TRL's batch sizes."""
    for name, v in (("num_processes", num_processes), ("gradient_accumulation_steps", gradient_accumulation_steps)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name}: expected a positive int, got {v!r}")
    B, split = r.prompts_per_step * r.num_generations, num_processes * r.num_mini_batches * gradient_accumulation_steps
    if B % split:
        raise ValueError(f"num_processes: B = P*G = {B} completions per step must split evenly over num_processes "
                         f"x num_mini_batches x gradient_accumulation_steps = {split}")
    return dict(per_device_train_batch_size=B // split, gradient_accumulation_steps=gradient_accumulation_steps,
                steps_per_generation=r.num_mini_batches * gradient_accumulation_steps)


def trl_mapping(recipe: str | Recipe, *, num_processes: int = 1, gradient_accumulation_steps: int = 1) -> TRLMapping:
    """The ``GRPOConfig`` fields for ``recipe`` and what TRL cannot express. Pure: needs no ``trl``."""
    r = recipes_mod.get(recipe)
    if r.num_generations < 2:
        raise ValueError(f"num_generations: TRL's GRPO needs G >= 2 completions per prompt, got {r.num_generations}")
    m = TRLMapping(kwargs={"run_name": f"rlnb-{r.name}"}, reward_weights={})
    for topic in TOPICS:
        topic(r, m)
    m.kwargs.update(batch_geometry(r, num_processes=num_processes,
                                   gradient_accumulation_steps=gradient_accumulation_steps))
    m.notes.append("sampling: TRL draws with transformers' generate (same distribution, other random draws)")
    follow = {"eps": TRL_STD_EPS, "unbiased": True} if r.advantage in STD_ADVANTAGES else {}
    m.matched = dataclasses.replace(r, **follow)
    return m


def mapping_table(names: list[str] | None = None) -> str:
    """A markdown table: each recipe's TRL loss settings and what TRL cannot express (notebook 15, README)."""
    lines = ["| recipe | TRL loss_type | importance sampling | scale_rewards | not expressible in TRL |",
             "|---|---|---|---|---|"]
    for name in names or recipes_mod.names():
        m = trl_mapping(name)
        gaps = ", ".join(f"`{g.field}={g.value!r}`" for g in m.unsupported) or "-"
        lines.append(f"| `{name}` | `{m.kwargs['loss_type']}` | `{m.kwargs['importance_sampling_level']}` | "
                     f"`{m.kwargs['scale_rewards']}` | {gaps} |")
    return "\n".join(lines)
