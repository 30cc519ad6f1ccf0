"""Recipe -> Hydra overrides of verl 0.9.1's PPO trainer, with everything verl cannot say listed, never dropped.

Pure (does not import verl): ``verl_mapping(recipe)`` returns ``{config key: value}`` for
``python -m verl.trainer.main_ppo`` and the same three lists as the TRL mapping: ``unsupported`` (the verl run
does something else there, and the entry says what), ``differences`` (another convention, slightly other
numbers), ``notes`` (conversions made). The tables were read off verl 0.9.1: ``verl/trainer/config/*.yaml``
(the keys), ``verl/trainer/ppo/core_algos.py`` (policy losses by ``policy_loss.loss_mode``, advantage
estimators by ``algorithm.adv_estimator``, ``agg_loss``, ``kl_penalty``), ``verl/workers/utils/losses.py``
(how the actor adds the entropy and KL terms). ``tests/test_export_verl.py`` composes the overrides with
verl's own config files and checks losses and advantages against verl's functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlnb import recipes as recipes_mod
from rlnb.algos.resolve import inert_knobs
from rlnb.core.knobs import UNSET
from rlnb.export.trl_map import Gap
from rlnb.recipe import Recipe

A = "actor_rollout_ref.actor."
VERL_STD_EPS = 1e-6      # verl's group std: torch.std (Bessel) + 1e-6, constants in compute_grpo_outcome_advantage
NO_DUAL_CLIP = 1e9       # verl's vanilla loss always dual-clips; above e^20 (its largest ratio) it never fires

# rlnb advantage -> (verl adv_estimator, norm_adv_by_std_in_grpo); the names are verl's own
ADV_ESTIMATORS = {"grpo": ("grpo", True), "dr_grpo": ("grpo", False), "rloo": ("rloo", True),
                  "reinforce_plus_plus": ("reinforce_plus_plus", True), "remax": ("remax", True),
                  "reinforce_plus_plus_baseline": ("reinforce_plus_plus_baseline", True), "opo": ("opo", True),
                  "grpo_passk": ("grpo_passk", True), "gpg": ("gpg", True), "gdpo": ("gdpo", True),
                  "optimal_token_baseline": ("optimal_token_baseline", True),
                  "tir_optimal_token_baseline": ("tir_optimal_token_baseline", True)}
STD_ADVANTAGES = {"grpo", "gdpo"}                     # whose eps and unbiased are verl constants
# rlnb policy loss -> verl loss_mode
LOSS_MODES = {"ppo_clip": "vanilla", "pg": "gpg", "gspo": "gspo", "sapo": "sapo", "cispo": "cispo",
              "geo_mean": "geo_mean", "dppo_tv": "dppo_tv", "dppo_kl": "dppo_kl", "clip_cov": "clip_cov",
              "kl_cov": "kl_cov", "dro": "dro"}
AGGREGATIONS = {"token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-sum-norm", "seq-mean-token-mean"}
KL_ESTIMATORS = {"k1", "k2", "k3", "abs", "k1+", "k3+", "abs+"}  # verl's kl_penalty accepts the same names
# knobs that are one verl key each, copied as they are
DIRECT = {"num_generations": "actor_rollout_ref.rollout.n", "temperature": "actor_rollout_ref.rollout.temperature",
          "top_p": "actor_rollout_ref.rollout.top_p", "max_new_tokens": "data.max_response_length",
          "lr": A + "optim.lr", "weight_decay": A + "optim.weight_decay", "num_iterations": A + "ppo_epochs",
          "entropy_coef": A + "entropy_coeff"}
CRITIC_FIELDS = ("gamma", "lam", "whiten_advantages", "vf_coef", "cliprange_value")
# knobs a rule below maps (or reports); every other knob is a gap when switched on
RULED = {"name", "paper", "prompts_per_step", "num_mini_batches", "warmup_steps", "max_grad_norm", "filters",
         "max_gen_rounds", "overlong_buffer", "format_weight", "advantage", "loss", "aggregation", "beta",
         "kl_estimator", "kl_in_reward", "kl_target", "kl_horizon", "use_bias_correction_kl", "critic",
         "entropy_aggregation", "entropy_target", "entropy_coef_delta", "entropy_coef_max", "fp32_lm_head",
         *CRITIC_FIELDS}
NEW_KEYS = ("reward.reward_kwargs.", "algorithm.gdpo_reward_")
# why verl lacks a knob that has no rule above (the knob's TRL reason would not fit)
VERL_LACKS = {"pass_rate_threshold": "verl keeps drawing solved prompts (no no-positive-resampling)",
              "topk_logprobs": "verl's rollout records no top-K log-probs",
              "mc_rollouts": "verl has no Monte-Carlo prefix values (VinePPO)",
              "rollout_correction": "not mapped by this export: verl's algorithm.rollout_correction (rollout_is, "
                                    "rollout_rs) bounds its ratios its own way; set it with --verl KEY=VALUE",
              "bypass_mode": "not mapped by this export (verl: algorithm.rollout_correction.bypass_mode)",
              "rollout_temperature": "a simulated sampler mismatch; verl's is its rollout engine's own",
              "rollout_bf16": "a simulated sampler mismatch; verl's is its rollout engine's own",
              "top_entropy_quantile": "verl has no top-entropy token mask (Beyond the 80/20 rule)"}  # keys verl reads that its yaml does not declare: Hydra's '+key=value'


@dataclass
class VerlMapping:
    overrides: dict                      # verl config key -> value
    unsupported: list[Gap] = field(default_factory=list)
    differences: list[Gap] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def expressible(self) -> bool:
        """True when verl runs the recipe's loss and advantage as rlnb does (no unsupported entry)."""
        return not self.unsupported

    def report(self) -> str:
        """Plain text: verl's algorithm settings, then every gap between the rlnb recipe and the verl run."""
        keys = ("algorithm.adv_estimator", A + "policy_loss.loss_mode", A + "loss_agg_mode", A + "use_kl_loss",
                "algorithm.use_kl_in_reward", "algorithm.filter_groups.enable")
        parts = ["verl: " + ", ".join(f"{k.split('.', 1)[1] if k.startswith('algorithm') else k[len(A):]}="
                                      f"{self.overrides[k]!r}" for k in keys if k in self.overrides)]
        for title, items in (("not expressible in verl (the verl run differs here)", self.unsupported),
                             ("expressed with another convention", self.differences), ("notes", self.notes)):
            parts.append(f"{title}:" + (" none" if not items else "".join(f"\n  - {x}" for x in items)))
        return "\n".join(parts)


def _direct(r: Recipe, m: VerlMapping) -> None:
    """Copy the one-key knobs; every knob without a verl rule is a gap when switched on."""
    inert = inert_knobs(r)
    hp = {n for stage in ("advantage", "loss") for n in r.hyperparameters()[stage]}  # the entries' own rules
    for name, k in Recipe.knobs().items():
        value = getattr(r, name)
        if name in DIRECT:
            m.overrides[DIRECT[name]] = value
        elif name not in RULED and name not in hp and value is not UNSET and value != k.off \
                and not (k.acts and name in inert) and not (k.entry and name in inert):
            m.unsupported.append(Gap(name, value, VERL_LACKS.get(name, "no verl key")))


def _batch(r: Recipe, m: VerlMapping) -> None:
    """One rlnb step = one verl step: P prompts x G rollouts, num_mini_batches optimizer steps per epoch."""
    P, k = r.prompts_per_step, r.num_mini_batches
    if P % k:
        raise ValueError(f"num_mini_batches: verl splits the P = {P} prompts into mini-batches of whole groups; "
                         f"{k} does not divide {P}")
    m.overrides.update({"data.train_batch_size": P, A + "ppo_mini_batch_size": P // k})
    if k > 1:
        m.notes.append(f"num_mini_batches={k} -> ppo_mini_batch_size={P // k} prompts (verl counts prompts, x n)")
    m.overrides[A + "optim.lr_warmup_steps"] = r.warmup_steps
    if r.warmup_steps:
        m.differences.append(Gap("warmup_steps", r.warmup_steps, "verl's warm-up ramps lr k/W (first step at "
                                 "lr 0) and rlnb's (k+1)/W: one optimizer step apart"))
    m.overrides[A + "optim.clip_grad"] = r.max_grad_norm or NO_DUAL_CLIP
    if not r.max_grad_norm:
        m.notes.append(f"max_grad_norm=0 (no clipping) -> clip_grad={NO_DUAL_CLIP:g}")


def _rewards(r: Recipe, m: VerlMapping) -> None:
    if r.overlong_buffer:
        m.overrides.update({"reward.reward_manager.name": "dapo",
                            "reward.reward_kwargs.overlong_buffer_cfg.enable": True,
                            "reward.reward_kwargs.overlong_buffer_cfg.len": r.overlong_buffer,
                            "reward.reward_kwargs.overlong_buffer_cfg.penalty_factor": 1.0,
                            "reward.reward_kwargs.overlong_buffer_cfg.log": False,
                            "reward.reward_kwargs.max_resp_len": r.max_new_tokens})
        m.notes.append(f"overlong_buffer={r.overlong_buffer}: verl's DAPO reward manager adds the same soft "
                       "penalty (lengths with EOS, as rlnb)")
    if r.format_weight:
        m.notes.append(f"format_weight={r.format_weight}: the reward function returns correct + "
                       f"{r.format_weight} x format as its score")
    for name in r.filters:
        if name == "dynamic_sampling":
            m.overrides.update({"algorithm.filter_groups.enable": True, "algorithm.filter_groups.metric": "reward"})
            m.differences.append(Gap("max_gen_rounds", r.max_gen_rounds, "verl's V1 trainer refills dropped "
                                     "groups until the batch is full (it ignores max_num_gen_batches); rlnb samples "
                                     "at most max_gen_rounds rounds and trains on what it has"))
        elif name == "zero_variance":
            m.unsupported.append(Gap("filters", name, "verl drops equal-reward groups only with a refill "
                                     "(filter_groups); without it they stay in the loss (zero advantage, their "
                                     "tokens still count in the normaliser)"))
        else:
            m.unsupported.append(Gap("filters", name, "verl does not mask truncated completions: they stay in "
                                     "the loss (with the overlong penalty when overlong_buffer > 0)"))
    if "dynamic_sampling" not in r.filters and r.max_gen_rounds > 1:
        m.unsupported.append(Gap("max_gen_rounds", r.max_gen_rounds, "verl refills only with dynamic_sampling"))


def _advantage(r: Recipe, m: VerlMapping) -> None:
    if r.critic:
        m.overrides.update({"algorithm.adv_estimator": "gae", "algorithm.gamma": r.gamma, "algorithm.lam": r.lam,
                            "critic.cliprange_value": r.cliprange_value})
        m.differences.append(Gap("critic", True, "verl's critic is a separate model with its own optimizer "
                                 "(critic.optim.lr, critic.model.path); rlnb's is a value head on the policy "
                                 f"trained in the same loss with vf_coef={r.vf_coef}"))
        if not r.whiten_advantages:
            m.unsupported.append(Gap("whiten_advantages", False, "verl's GAE always whitens the advantages"))
        return
    hp = r.hyperparameters()["advantage"]
    if r.advantage not in ADV_ESTIMATORS:
        m.unsupported.append(Gap("advantage", r.advantage, "verl has no such advantage estimator; the verl run "
                                 "uses adv_estimator='grpo' ((r - group mean) / (group std + 1e-6))"))
        m.overrides.update({"algorithm.adv_estimator": "grpo", "algorithm.norm_adv_by_std_in_grpo": True})
        return
    name, by_std = ADV_ESTIMATORS[r.advantage]
    m.overrides.update({"algorithm.adv_estimator": name, "algorithm.norm_adv_by_std_in_grpo": by_std})
    if r.advantage in STD_ADVANTAGES:
        if hp.get("unbiased") is False:
            m.differences.append(Gap("unbiased", False, "verl's group std always divides by G - 1"))
        if hp.get("eps") != VERL_STD_EPS:
            m.differences.append(Gap("eps", hp.get("eps"), f"verl divides by (std + {VERL_STD_EPS:g}), a constant"))
    if r.advantage == "gdpo":
        m.overrides.update({"algorithm.gdpo_reward_keys": ["correct", "format"],
                            "algorithm.gdpo_reward_weights": [1.0, r.format_weight]})
    if r.advantage in ("optimal_token_baseline", "tir_optimal_token_baseline"):
        m.overrides[A + "calculate_sum_pi_squared"] = True
    verl_defaults = {"gpg_alpha_nonzero": True, "singleton_zero": False, "pass_k": None, "handle_zero_tail": True}
    for knob, value in verl_defaults.items():
        if knob in hp and hp[knob] != value:
            m.unsupported.append(Gap(knob, hp[knob], f"verl's {name} has {knob}={value} built in"))


def _loss_knobs(loss: str, hp: dict) -> dict:
    """The actor keys of verl's ``loss_mode`` for rlnb's ``loss`` with its resolved knobs ``hp``."""
    if loss in ("ppo_clip", "gspo", "geo_mean", "cispo", "clip_cov"):
        high = hp["cispo_cap"] - 1 if loss == "cispo" and hp.get("cispo_cap") is not None else hp["eps_high"]
        out = {"clip_ratio": hp["eps_low"], "clip_ratio_low": hp["eps_low"], "clip_ratio_high": high}
        if loss == "ppo_clip":
            out["clip_ratio_c"] = hp["dual_clip_c"] if hp["dual_clip_c"] is not None else NO_DUAL_CLIP
        if loss == "clip_cov":
            out.update({f"policy_loss.{k}": hp[k] for k in ("clip_cov_ratio", "clip_cov_lb", "clip_cov_ub")})
        return out
    if loss in ("dppo_tv", "dppo_kl"):
        d = hp["dppo_delta"]
        return {"clip_ratio": d, "clip_ratio_low": d, "clip_ratio_high": d, "clip_ratio_c": hp["dppo_cap"]}
    if loss == "sapo":
        return {"tau_pos": hp["tau_pos"], "tau_neg": hp["tau_neg"]}
    if loss == "kl_cov":
        return {"policy_loss.kl_cov_ratio": hp["kl_cov_ratio"], "policy_loss.ppo_kl_coef": hp["kl_cov_coef"]}
    if loss == "dro":
        return {"policy_loss.dro_beta": hp["dro_beta"]}
    return {}  # pg: verl's gpg loss has no knob


def _loss(r: Recipe, m: VerlMapping) -> None:
    loss = r.loss if r.loss in LOSS_MODES else "ppo_clip"
    if loss != r.loss:
        m.unsupported.append(Gap("loss", r.loss, "verl 0.9.1 has no such policy loss; the verl run uses "
                                 "loss_mode='vanilla' (PPO clip) with verl's default clip range 0.2"))
    hp = r.hyperparameters()["loss"] if loss == r.loss else r.replace(loss=loss).hyperparameters()["loss"]
    m.overrides[A + "policy_loss.loss_mode"] = LOSS_MODES[loss]
    m.overrides.update({A + k: v for k, v in _loss_knobs(loss, hp).items()})
    if loss == "ppo_clip" and hp["dual_clip_c"] is None:
        m.notes.append(f"no dual-clip: clip_ratio_c={NO_DUAL_CLIP:g}, above e^20 (verl clamps log rho at +-20)")
    if r.loss == "cispo" and hp.get("cispo_cap") is not None:
        m.notes.append(f"cispo_cap={hp['cispo_cap']} -> clip_ratio_high={hp['cispo_cap'] - 1:g} (verl caps at 1 + it)")
    agg = r.aggregation if r.aggregation in AGGREGATIONS else "token-mean"
    if agg != r.aggregation:
        m.unsupported.append(Gap("aggregation", r.aggregation, "verl has no such loss aggregation; the verl run "
                                 "uses loss_agg_mode='token-mean'"))
    if loss == "sapo" and agg != "seq-mean-token-mean":
        m.unsupported.append(Gap("aggregation", agg, "verl's sapo loss always aggregates seq-mean-token-mean"))
    m.overrides[A + "loss_agg_mode"] = agg
    if agg == "seq-mean-token-sum-norm":
        m.overrides[A + "loss_scale_factor"] = r.max_new_tokens
        m.notes.append(f"seq-mean-token-sum-norm: loss_scale_factor = max_new_tokens = {r.max_new_tokens} "
                       "(verl's default would be the batch's padded length)")


def _kl_entropy(r: Recipe, m: VerlMapping) -> None:
    if r.kl_in_reward and r.beta > 0:
        m.overrides.update({"algorithm.use_kl_in_reward": True, "algorithm.kl_penalty": "k1",
                            "algorithm.kl_ctrl.kl_coef": r.beta, A + "use_kl_loss": False})
        if r.critic:
            m.differences.append(Gap("kl_in_reward", True, "verl puts each token's KL penalty on that token, so "
                                     "GAE credits it only to the tokens before it; rlnb adds -beta sum_t k1 to "
                                     "the outcome reward on the last token"))
        if r.kl_target is not None:
            m.overrides.update({"algorithm.kl_ctrl.type": "adaptive", "algorithm.kl_ctrl.target_kl": r.kl_target,
                                "algorithm.kl_ctrl.horizon": r.kl_horizon})
    elif r.beta > 0:
        est = r.kl_estimator if r.kl_estimator in KL_ESTIMATORS else "k3"
        if est != r.kl_estimator:
            m.unsupported.append(Gap("kl_estimator", r.kl_estimator, "verl has no such KL estimator; the verl run "
                                     "uses kl_loss_type='k3'"))
        m.overrides.update({A + "use_kl_loss": True, A + "kl_loss_coef": r.beta, A + "kl_loss_type": est,
                            "algorithm.use_kl_in_reward": False})
        if r.kl_target is not None:
            m.unsupported.append(Gap("kl_target", r.kl_target, "verl adapts beta only for the KL in the reward"))
    else:
        m.overrides.update({A + "use_kl_loss": False, "algorithm.use_kl_in_reward": False})
    if r.use_bias_correction_kl and r.beta > 0 and not r.kl_in_reward:
        m.unsupported.append(Gap("use_bias_correction_kl", True, "verl's KL loss has no ratio factor"))
    if r.entropy_target is not None:
        m.unsupported.append(Gap("entropy_target", r.entropy_target, "verl keeps entropy_coeff fixed (no "
                                 f"thermostat); the verl run uses entropy_coeff={r.entropy_coef}"))
    if r.entropy_coef and r.entropy_aggregation == "pushed-token-mean" and (
            r.aggregation != "token-mean" or r.top_entropy_quantile < 1):
        m.unsupported.append(Gap("entropy_aggregation", r.entropy_aggregation, "verl's entropy bonus is the "
                                 f"loss's aggregation ({r.aggregation}) of H over every valid token "
                                 "('loss-aggregation'); rlnb here takes the token mean over the pushed tokens"))


def _run(r: Recipe, m: VerlMapping) -> None:
    if r.fp32_lm_head:
        m.unsupported.append(Gap("fp32_lm_head", True, "verl 0.9.1's FSDP actor has no fp32 LM-head switch"))
    m.overrides.update({"trainer.project_name": "rlnb", "trainer.experiment_name": f"rlnb-{r.name}",
                        "trainer.val_before_train": False})
    m.notes.append("sampling: verl samples with its rollout engine (vLLM/SGLang): same distribution, other draws")


TOPICS = (_direct, _batch, _rewards, _advantage, _loss, _kl_entropy, _run)


def verl_mapping(recipe: str | Recipe) -> VerlMapping:
    """The verl 0.9.1 config values for ``recipe`` and what verl cannot express. Pure: needs no verl."""
    r = recipes_mod.get(recipe)
    m = VerlMapping(overrides={})
    for topic in TOPICS:
        topic(r, m)
    return m


def hydra_value(value) -> str:
    """``value`` in Hydra's override grammar (``true``, ``null``, ``[a,b]``, ``1e-06``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if isinstance(value, float):  # the shortest exact form a reader can take in: 1e+09, not 1000000000.0
        short = f"{value:g}"
        return short if ("e" in short or "." in short) and float(short) == value else repr(value)
    return str(value)


def hydra_overrides(overrides: dict) -> list[str]:
    """``['key=value', '+new.key=value', ...]``: ``+`` for the keys verl reads but its yaml leaves out."""
    return [("+" if k.startswith(NEW_KEYS) else "") + f"{k}={hydra_value(v)}" for k, v in overrides.items()]
