"""``Recipe``: which registry entries a run uses, and every hyperparameter, each declared once.

Each field is a knob (``rlnb.core.knobs.knob``): its doc, paper symbol, range, slider, TRL name and CLI flag
sit in the declaration, and validation, sliders, ``rlnb train`` flags, ``to_trl`` and ``docs/knobs.md``
are derived from it. Registry functions take their hyperparameters as keyword-only arguments named
exactly like these fields; ``rlnb.algos.bind(fn, recipe)`` fills them. A field declared with the
default ``UNSET`` belongs to registry entries: left unset, the chosen entry's own default runs
(``recipe.hyperparameters()`` shows what that is). Names follow TRL where TRL has one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from rlnb.algos.resolve import check_recipe, hyperparameters, released_knobs
from rlnb.core.checks import closest
from rlnb.core.knobs import UNSET, Knob, check_value, declared, knob

NO_CRITIC = "PPO with a value head is TRL's PPOTrainer, not GRPOTrainer"


@dataclass(frozen=True)
class Recipe:
    """A complete training configuration. Build one with ``rlnb.recipes.get(name, **overrides)``."""

    name: str = knob("Recipe name.", "custom", no_trl="a label (TRL's run_name is derived from it)", group="meta")
    paper: str = knob("Where the recipe comes from (title, arXiv id).", "", no_trl="a label", group="meta")

    # --- sampling -------------------------------------------------------------------------------
    num_generations: int = knob("Completions sampled per prompt (a group).", 8, symbol="G", range="[1, inf)",
                                slider=(2, 16, 1), trl="num_generations", group="sampling")
    prompts_per_step: int = knob("Prompts per step; the batch has B = P * G completions.", 16, symbol="P",
                                 range="[1, inf)", slider=(1, 32, 1), group="sampling",
                                 no_trl="TRL sizes batches per device (see rlnb.export.batch_geometry)")
    temperature: float = knob("Sampling temperature; log-probs are computed at the same temperature.", 1.0,
                              symbol="τ", range="(0, inf)", slider=(0.05, 2.0, 0.05), trl="temperature",
                              group="sampling")
    top_p: float = knob("Nucleus sampling: keep the smallest token set with probability >= top_p.", 1.0,
                        symbol="p", range="(0, 1]", slider=(0.05, 1.0, 0.05), trl="top_p", off=1.0,
                        group="sampling")
    max_new_tokens: int = knob("Longest completion in tokens; also the constant L of "
                               "seq-mean-token-sum-norm.", 32, symbol="L_max", range="[1, inf)",
                               slider=(1, 128, 1), trl="max_completion_length", group="sampling")
    max_gen_rounds: int = knob("Dynamic sampling (DAPO): sample up to this many rounds of fresh prompts to "
                               "refill groups the filters drop; 1 = no refill.", 1, range="[1, inf)",
                               slider=(1, 8, 1), off=1, group="filters",
                               no_trl="TRL's GRPOTrainer trains on every group it samples, no refill")
    pass_rate_threshold: float | None = knob("No-positive-resampling (ScaleRL): retire a prompt once a group "
                                             "of it reaches this pass rate; None = off.", None,
                                             range="(0, 1]", slider=(0.5, 1.0, 0.05), on=0.9, group="filters",
                                             no_trl="TRL keeps drawing solved prompts")
    topk_logprobs: int = knob("Record the rollout's top-K token log-probs (DPPO's top-K losses need them).", 0,
                              symbol="K", range="[0, inf)", slider=(0, 32, 1), off=0, group="sampling",
                              no_trl="TRL does not record the rollout's top-K")
    mc_rollouts: int = knob("VinePPO: continuations sampled from every prefix of a completion to estimate its "
                            "value V(s_t) (only estimators listing prefix_values use it).", 4, symbol="K",
                            range="[1, inf)", slider=(1, 32, 1), group="sampling",
                            no_trl="TRL has no Monte-Carlo prefix values", acts="prefix_values")

    # --- reward ---------------------------------------------------------------------------------
    format_weight: float = knob("Weight of the task's format reward in the total reward.", 0.0,
                                symbol="w_fmt", range="(-inf, inf)", slider=(0.0, 1.0, 0.05), off=0.0,
                                trl="reward_weights", group="reward")
    overlong_buffer: int = knob("DAPO's soft overlong punishment: the penalty ramps from 0 at L_max - L_cache "
                                "to -1 at L_max; 0 = off.", 0, symbol="L_cache", range="[0, inf)",
                                slider=(0, 32, 1), off=0, group="reward",
                                no_trl="passed to TRL as an extra reward function 'overlong'")
    filters: tuple = knob("Names in rlnb.algos.FILTERS whose keep masks (ANDed) decide which rows enter the "
                          "loss, e.g. ('zero_variance',), ('dynamic_sampling',), ('overlong',).", (),
                          choices="FILTERS", off=(), group="filters",
                          no_trl="only 'overlong' maps (mask_truncated_completions)")

    # --- advantage ------------------------------------------------------------------------------
    advantage: str = knob("Advantage estimator, a key of rlnb.algos.ADVANTAGES.", "grpo", choices="ADVANTAGES",
                          trl="scale_rewards", group="advantage")
    unbiased: bool = knob("Std with Bessel's correction (divide by G-1) in the std normalisation.", UNSET,
                          group="advantage", no_trl="TRL's std always divides by N-1")
    eps: float = knob("Epsilon in the advantage's denominator (GRPO's std, MaxRL's mean, the optimal token "
                      "baseline's path weight).", UNSET, symbol="ε",
                      range="(0, 1]", slider=(-9, -1, 0.5), scale="log", group="advantage",
                      no_trl="TRL divides by (std + 1e-4), a constant in its code")
    batch_std_centred: bool = knob("batch_norm: divide by the std of the group-centred rewards "
                                   "(REINFORCE++-baseline) instead of the raw rewards (Lite-PPO).", UNSET,
                                   group="advantage", no_trl="TRL's batch std is over the raw rewards")
    pass_k: int | None = knob("grpo_passk: train for the best of k samples (pass@k); None = k = G, the whole "
                              "group (verl's grpo_passk).", UNSET, symbol="k", range="[2, inf)", slider=(2, 16, 1),
                              on=2, group="advantage", no_trl="TRL has no pass@k advantage")
    gpg_alpha_nonzero: bool = knob("gpg: alpha = B / (rows with a nonzero reward), verl 0.9.1's count (True); "
                                   "False: the paper's B / (B - M), M the rows of groups with equal rewards.", UNSET,
                                   group="advantage", no_trl="TRL has no GPG advantage")
    singleton_zero: bool = knob("gpg, gdpo: a singleton group (G = 1) gets A = 0 (rlnb's rule for group "
                                "estimators) instead of verl's group mean 0 and std 1 (gpg: alpha r; gdpo: the "
                                "whitened r).", UNSET, group="advantage",
                                no_trl="TRL's GRPO needs G >= 2 completions per prompt")
    handle_zero_tail: bool = knob("Optimal token baseline: past the second-longest completion of a group, the "
                                  "longest gets no baseline (A = r) instead of its own return (A = 0).", UNSET,
                                  group="advantage", no_trl="TRL has no per-token optimal baseline")

    # --- policy loss ----------------------------------------------------------------------------
    loss: str = knob("Per-token policy loss, a key of rlnb.algos.POLICY_LOSSES.", "ppo_clip",
                     choices="POLICY_LOSSES", trl="loss_type", group="loss")
    eps_low: float = knob("Lower clip range: the ratio is clipped below at 1 - eps_low (geo_mean: log rho at "
                          "-eps_low).", UNSET, symbol="ε_low",
                          range="[0, 1]", slider=(0.0, 1.0, 0.01), trl="epsilon", group="loss", acts="ratio")
    eps_high: float = knob("Upper clip range: the ratio is clipped above at 1 + eps_high (geo_mean: log rho at "
                           "eps_high).", UNSET,
                           symbol="ε_high", range="[0, inf)", slider=(0.0, 1.0, 0.01), trl="epsilon_high",
                           group="loss", acts="ratio")
    aggregation: str = knob("How the per-token loss becomes a scalar, a key of rlnb.algos.AGGREGATIONS.",
                            "seq-mean-token-mean", choices="AGGREGATIONS", trl="loss_type", group="aggregation")
    dual_clip_c: float | None = knob("Dual-clip PPO: for A < 0 the loss is at most -A c (c > 1, verl uses 3); "
                                     "None = off.", UNSET, symbol="c", range="(1, inf)",
                                     slider=(1.05, 10.0, 0.05), on=3.0, trl="delta", group="loss",
                                     acts="ratio")
    cispo_cap: float | None = knob("CISPO's IS-weight cap. None = 1 + eps_high (MiniMax-M1, verl); a number = "
                                   "an absolute cap (TRL's epsilon_high with loss_type='cispo').", UNSET,
                                   range="(0, inf)", slider=(0.5, 10.0, 0.1), on=5.0, trl="epsilon_high",
                                   group="loss", acts="ratio")
    tau_pos: float = knob("SAPO gate temperature for A > 0.", UNSET, symbol="τ_pos", range="(0, inf)",
                          slider=(0.1, 5.0, 0.05), trl="sapo_temperature_pos", group="loss")
    tau_neg: float = knob("SAPO gate temperature for A <= 0 (larger decays faster).", UNSET, symbol="τ_neg",
                          range="(0, inf)", slider=(0.1, 5.0, 0.05), trl="sapo_temperature_neg", group="loss")
    dppo_delta: float = knob("DPPO trust-region radius.", UNSET, symbol="δ", range="(0, inf)",
                             slider=(0.0, 0.5, 0.01), group="loss", no_trl="TRL has no DPPO loss")
    dppo_cap: float = knob("DPPO cap C on the IS weight, min(rho, C).", UNSET, symbol="C", range="(0, inf)",
                           slider=(1.0, 20.0, 0.5), group="loss", no_trl="TRL has no DPPO loss")
    clip_cov_ratio: float = knob("Clip-Cov: share of the valid tokens whose gradient is detached (at least 1 "
                                 "per batch), picked among those with lb < Cov(logp, A) < ub.", UNSET, symbol="r",
                                 range="(0, 1]", slider=(-5, 0, 0.25), scale="log", group="loss",
                                 no_trl="TRL has no Clip-Cov loss")
    clip_cov_lb: float = knob("Clip-Cov: lower bound of the covariance band of detachable tokens.", UNSET,
                              symbol="ω_low", range="(-inf, inf)", slider=(0.0, 5.0, 0.1), group="loss",
                              no_trl="TRL has no Clip-Cov loss")
    clip_cov_ub: float = knob("Clip-Cov: upper bound of the covariance band of detachable tokens.", UNSET,
                              symbol="ω_high", range="(-inf, inf)", slider=(1.0, 20.0, 0.5), group="loss",
                              no_trl="TRL has no Clip-Cov loss")
    kl_cov_ratio: float = knob("KL-Cov: share of the valid tokens (at least 1) with the largest Cov(logp, A) "
                               "that get the |log rho| penalty.", UNSET, symbol="k", range="(0, 1]",
                               slider=(-5, 0, 0.25), scale="log", group="loss", no_trl="TRL has no KL-Cov loss")
    kl_cov_coef: float = knob("KL-Cov: coefficient of the |log rho| penalty (the paper's β, verl's ppo_kl_coef).",
                              UNSET, symbol="β_cov", range="[0, inf)", slider=(0.0, 5.0, 0.1), group="loss",
                              no_trl="TRL has no KL-Cov loss")
    dro_beta: float = knob("DRO: coefficient of the quadratic penalty (beta/2)(logp - old_logp)^2; each token's "
                           "optimum sits at log rho = A / beta (verl's policy_loss.dro_beta). No default, as in "
                           "verl: the loss 'dro' raises until it is set.", UNSET, symbol="β_DRO", on=1.0,
                           range="(0, inf)", slider=(0.05, 5.0, 0.05), group="loss", no_trl="TRL has no DRO loss")

    vespo_k_pos: float = knob("VESPO: power k of the sequence weight phi(w) = e^lam w^k e^(-lam w) for A >= 0 "
                              "(how hard a low ratio is down-weighted).", UNSET, symbol="k_+", range="[0, inf)",
                              slider=(0.0, 6.0, 0.1), trl="vespo_k_pos", group="loss", acts="ratio")
    vespo_lambda_pos: float = knob("VESPO: decay lam of phi(w) for A >= 0 (how hard a high ratio is down-weighted).",
                                   UNSET, symbol="λ_+", range="[0, inf)", slider=(0.0, 6.0, 0.1),
                                   trl="vespo_lambda_pos", group="loss", acts="ratio")
    vespo_k_neg: float = knob("VESPO: power k of phi(w) for A < 0.", UNSET, symbol="k_-", range="[0, inf)",
                              slider=(0.0, 6.0, 0.1), trl="vespo_k_neg", group="loss", acts="ratio")
    vespo_lambda_neg: float = knob("VESPO: decay lam of phi(w) for A < 0.", UNSET, symbol="λ_-", range="[0, inf)",
                                   slider=(0.0, 6.0, 0.1), trl="vespo_lambda_neg", group="loss", acts="ratio")

    # --- rollout correction (the sampler is not exactly the trainer) ------------------------------
    rollout_correction: tuple = knob("Names in rlnb.algos.ROLLOUT_CORRECTIONS (composed by product) that reweight "
                                     "or drop tokens by the rollout ratio pi_train / mu, e.g. ('token_truncate',), "
                                     "('sequence_mask',), ('token_reject',), ('off_policy_mask',).", (),
                                     choices="ROLLOUT_CORRECTIONS", off=(), group="correction",
                                     no_trl="mapped to vllm_importance_sampling_mode / off_policy_mask_threshold "
                                     "where TRL has the entry (vLLM runs only)")
    rollout_is_min: float | None = knob("Lower bound C_min of the rollout IS ratio (truncated up to it, or masked "
                                        "below it); None = no lower bound.", UNSET, symbol="C_min",
                                        range="(0, inf)", slider=(0.05, 1.0, 0.05), on=0.5, group="correction",
                                        trl="vllm_importance_sampling_clip_min")
    rollout_is_max: float | None = knob("Upper bound C_max of the rollout IS ratio (truncated down to it, or masked "
                                        "above it); None = no upper bound. TRL 3.0, verl's rollout_is_threshold "
                                        "2.0.", UNSET, symbol="C_max", range="(0, inf)", slider=(1.0, 10.0, 0.1),
                                        on=2.0, group="correction", trl="vllm_importance_sampling_clip_max")
    rollout_rs_estimator: str = knob("Rejection: the per-token divergence of mu from pi_train, a key of "
                                     "rlnb.algos.KL_ESTIMATORS (verl: k1, k2, k3).", UNSET,
                                     choices="KL_ESTIMATORS", group="correction",
                                     no_trl="TRL has no divergence-based rejection")
    rollout_rs_threshold: float = knob("Rejection threshold C (k1: keep log mu/pi in [-log C, log C]; k2, k3: keep "
                                       "the divergence <= C); no default, as in verl.", UNSET, symbol="C_rs",
                                       range="(0, inf)", slider=(0.001, 5.0, 0.001), on=2.0, group="correction",
                                       no_trl="TRL has no divergence-based rejection")
    rollout_rs_reduce: str = knob("Sequence rejection: 'sum', 'mean' or 'max' of the row's token divergences "
                                  "(verl's seq_sum / seq_mean / seq_max).", UNSET, choices="SEQUENCE_REDUCTIONS", group="correction",
                                  no_trl="TRL has no divergence-based rejection")
    off_policy_mask_threshold: float = knob("Off-policy sequence mask (DeepSeek-V3.2): drop rows with A < 0 whose "
                                            "mean KL(mu || pi_theta) exceeds delta; no default, as in TRL.", UNSET,
                                            symbol="δ_OPSM", range="(0, inf)", slider=(0.01, 2.0, 0.01), on=0.5,
                                            trl="off_policy_mask_threshold", group="correction")
    bypass_mode: bool = knob("verl's bypass mode: pi_old := mu, the sampler's own log-probs (no recompute), so the "
                             "loss's ratio pi / mu sees the mismatch; IS weights then compare pi with mu.", False,
                             off=False, group="correction", no_trl="TRL always recomputes old log-probs")
    rollout_temperature: float | None = knob("A mismatched sampler: sample at this temperature while the trainer "
                                             "scores at temperature; None = the same.", None, symbol="τ_μ",
                                             range="(0, inf)", slider=(0.05, 2.0, 0.05), on=1.2, group="correction",
                                             no_trl="TRL samples at its temperature")
    rollout_bf16: bool = knob("A mismatched sampler: sample under bf16 autocast (a lower-precision inference "
                              "engine); the trainer scores in the model's dtype.", False, off=False,
                              group="correction", no_trl="vLLM's dtype is vLLM's own setting")

    # --- KL and entropy -------------------------------------------------------------------------
    beta: float = knob("KL coefficient; 0 skips the reference model entirely (kl_coef in TRL's PPOTrainer, "
                       "where the KL sits in the reward).", 0.0, symbol="β", range="[0, inf)",
                       slider=(0.0, 0.5, 0.005), trl="beta", off=0.0, group="kl")
    kl_estimator: str = knob("KL estimator, a key of rlnb.algos.KL_ESTIMATORS (used in the loss).", "k3",
                             choices="KL_ESTIMATORS", group="kl", no_trl="TRL's KL in the loss is k3 only")
    use_bias_correction_kl: bool = knob("Multiply the per-token KL by the policy ratio pi_theta / pi_old "
                                        "(DeepSeek-V3.2's unbiased KL; TRL's default True; verl has no such "
                                        "factor).", False, trl="use_bias_correction_kl", group="kl")
    kl_in_reward: bool = knob("Put the KL in the reward (r - beta sum_t k1, classic PPO/RLOO) instead of in the "
                              "loss (GRPO).", False, off=False, group="kl",
                              no_trl="TRL's GRPOTrainer puts the KL in the loss only")
    kl_target: float | None = knob("Adaptive beta (Ziegler et al. 2019): steer the token-mean KL toward this "
                                   "target; None = fixed beta.", None, symbol="KL_target", range="(0, inf)",
                                   slider=(-4, 0, 0.25), scale="log", on=0.01, group="kl",
                                   no_trl="adaptive beta: TRL keeps beta fixed")
    kl_horizon: int = knob("Horizon of the adaptive-beta controller, in samples.", 10_000, range="[1, inf)",
                           slider=(100, 100_000, 100), group="kl", no_trl="adaptive beta: TRL keeps beta fixed")
    entropy_coef: float = knob("Entropy bonus coefficient: loss -= entropy_coef * agg(H); the start value when "
                               "the thermostat is on.", 0.0, symbol="α", range="[0, inf)",
                               slider=(0.0, 0.05, 0.001), off=0.0, trl="entropy_coef", group="entropy")
    entropy_target: float | None = knob("Entropy thermostat (Skywork-OR1): target token-mean entropy; the "
                                        "coefficient rises below it and falls above; None = fixed.", None,
                                        symbol="H_target", range="[0, inf)", slider=(0.0, 2.0, 0.01), on=0.3,
                                        trl="entropy_target", group="entropy")
    entropy_coef_delta: float = knob("Thermostat step of the entropy coefficient per training step.", 1e-3,
                                     symbol="Δα", range="[0, inf)", slider=(0.0, 0.01, 0.0005),
                                     trl="entropy_coef_delta", group="entropy")
    entropy_coef_max: float = knob("Thermostat upper bound of the entropy coefficient.", 0.05, symbol="α_max",
                                   range="[0, inf)", slider=(0.0, 0.2, 0.005), trl="entropy_coef_max",
                                   group="entropy")
    entropy_aggregation: str = knob("How the entropy bonus averages H, a key of rlnb.algos.ENTROPY_BONUSES: "
                                    "'pushed-token-mean' (TRL 1.16: token mean over the tokens the policy "
                                    "gradient reaches) or 'loss-aggregation' (verl 0.9.1: the loss's aggregation "
                                    "over every valid token).", "pushed-token-mean", choices="ENTROPY_BONUSES",
                                    group="entropy", no_trl="TRL's bonus is always 'pushed-token-mean'")
    top_entropy_quantile: float = knob("Keep only the top quantile of the batch's valid tokens by entropy in the "
                                       "policy loss (Beyond the 80/20 rule; the paper uses 0.2); 1.0 keeps all.",
                                       1.0, symbol="ρ", range="[0, 1]", slider=(0.05, 1.0, 0.05), off=1.0,
                                       trl="top_entropy_quantile", group="entropy")

    # --- critic (PPO) ---------------------------------------------------------------------------
    critic: bool = knob("PPO with a value head on the policy: per-token GAE advantages instead of the group "
                        "estimator.", False, off=False, group="critic", no_trl=NO_CRITIC)
    gamma: float = knob("GAE discount (1 for LLMs).", 1.0, symbol="γ", range="[0, 1]", slider=(0.8, 1.0, 0.01),
                        group="critic", no_trl=NO_CRITIC)
    lam: float = knob("GAE lambda (1 for LLMs).", 1.0, symbol="λ", range="[0, 1]", slider=(0.0, 1.0, 0.05),
                      group="critic", no_trl=NO_CRITIC)
    whiten_advantages: bool = knob("Whiten GAE advantages over the batch's tokens.", True, group="critic",
                                   no_trl=NO_CRITIC)
    vf_coef: float = knob("Weight of the value loss in the total loss.", 0.5, symbol="c_v", range="[0, inf)",
                          slider=(0.0, 2.0, 0.05), group="critic", no_trl=NO_CRITIC)
    cliprange_value: float = knob("Clip range of the value update around the rollout's values.", 0.2,
                                  symbol="ε_v", range="(0, inf)", slider=(0.01, 1.0, 0.01), group="critic",
                                  no_trl=NO_CRITIC)

    # --- optimisation ---------------------------------------------------------------------------
    lr: float = knob("Adam learning rate (scaled to the 1M-parameter default model).", 1e-4, symbol="η",
                     range="(0, inf)", slider=(-6, -2, 0.1), scale="log", trl="learning_rate", group="optimisation")
    warmup_steps: int = knob("Linear learning-rate warm-up, in optimizer steps.", 10, range="[0, inf)",
                             slider=(0, 100, 1), trl="warmup_steps", group="optimisation")
    weight_decay: float = knob("AdamW weight decay.", 0.0, range="[0, inf)", slider=(0.0, 0.1, 0.001),
                               trl="weight_decay", group="optimisation")
    max_grad_norm: float = knob("Gradient clipping by global norm (0 disables).", 1.0, range="[0, inf)",
                                slider=(0.0, 5.0, 0.1), trl="max_grad_norm", group="optimisation")
    num_iterations: int = knob("Epochs over each batch.", 1, symbol="μ", range="[1, inf)", slider=(1, 8, 1),
                               trl="num_iterations", group="optimisation")
    num_mini_batches: int = knob("Optimizer steps per epoch; >1 makes the ratio leave 1 so clipping can fire.", 1,
                                 range="[1, inf)", slider=(1, 8, 1), trl="steps_per_generation",
                                 group="optimisation")
    fp32_lm_head: bool = knob("Compute the LM head in fp32 (MiniMax-M1, ScaleRL): smaller rollout/train mismatch "
                              "in bf16 models.", False, trl="cast_lm_head_to_fp32", group="optimisation")

    def __post_init__(self):
        for name in ("filters", "rollout_correction"):  # accept a list or one name; store a hashable tuple
            v = getattr(self, name)
            if isinstance(v, (list, str)):
                object.__setattr__(self, name, (v,) if isinstance(v, str) else tuple(v))
        check_recipe(self)  # types, ranges, registry names: a bad recipe never exists

    @staticmethod
    def knobs() -> dict[str, Knob]:
        """``{name: Knob}``: every field's declaration (doc, symbol, range, slider, TRL name, flag)."""
        return _KNOBS

    @staticmethod
    def field_docs() -> dict[str, str]:
        return {n: k.doc for n, k in _KNOBS.items()}

    def replace(self, **changes) -> Recipe:
        """A copy with ``changes``; unknown field names raise and list the known ones. Choosing another
        registry entry (``loss="cispo"``) returns the old entry's knobs to UNSET unless ``changes`` set
        them too: a recipe's clip range belongs to its loss, so CISPO then runs with its own defaults."""
        known = set(_KNOBS)
        bad = sorted(set(changes) - known)
        if bad:
            raise TypeError(f"{bad[0]}: Recipe has no field(s) {bad}; known fields: {sorted(known)}"
                            f"{closest(bad[0], known)}")
        return dataclasses.replace(self, **{**released_knobs(self, changes), **changes})

    def to_dict(self) -> dict:
        """JSON-friendly fields; UNSET entry knobs are left out (``Recipe(**d)`` restores them)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not UNSET}

    def hyperparameters(self) -> dict[str, dict]:
        """What runs, per stage: ``{"loss": {"loss": "cispo", "eps_low": 1.0, ...}, ...}`` with every UNSET
        knob resolved to the chosen entry's own default (see ``rlnb.algos.resolve``)."""
        return hyperparameters(self)


_KNOBS = declared(Recipe)


def check_fields(aliases: dict | None = None, **values) -> None:
    """Stage and optimizer arguments that carry a Recipe field, checked against that field's declared kind
    and range (one declaration for both); ``aliases`` maps an argument to its field (``topk`` ->
    ``topk_logprobs``). The message names the argument."""
    for arg, value in values.items():
        check_value(dataclasses.replace(_KNOBS[(aliases or {}).get(arg, arg)], name=arg), value)
