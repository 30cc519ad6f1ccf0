"""``Recipe``: which registry entries a run uses, and every hyperparameter, one documented field each.

Registry functions take their hyperparameters as keyword-only arguments named exactly like these
fields; ``rlnb.algos.bind(fn, recipe)`` fills them. Sliders, CLI flags and the README's recipe table are
generated from the same fields. Names follow TRL where TRL has one; where our symbol differs, the field's
doc names TRL's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field


def doc(text: str, default, **kw):
    """A dataclass field with its documentation in ``metadata["doc"]``."""
    if isinstance(default, (list, dict, set)):
        return field(default_factory=lambda: type(default)(default), metadata={"doc": text}, **kw)
    return field(default=default, metadata={"doc": text}, **kw)


@dataclass(frozen=True)
class Recipe:
    """A complete training configuration. Build one with ``rlnb.recipes.get(name, **overrides)``."""

    name: str = doc("Recipe name.", "custom")
    paper: str = doc("Where the recipe comes from (title, arXiv id).", "")

    # --- sampling -------------------------------------------------------------------------------
    num_generations: int = doc("G: completions sampled per prompt (a group). TRL: num_generations.", 8)
    prompts_per_step: int = doc("P: prompts per step; the batch has B = P * G completions.", 16)
    temperature: float = doc("Sampling temperature; log-probs are computed at the same temperature.", 1.0)
    top_p: float = doc("Nucleus sampling: keep the smallest token set with probability >= top_p.", 1.0)
    max_new_tokens: int = doc("L_max: longest completion in tokens (TRL: max_completion_length); also the "
                              "constant L of seq-mean-token-sum-norm.", 32)
    max_gen_rounds: int = doc("Dynamic sampling (DAPO): sample up to this many rounds of fresh prompts to "
                              "refill groups the filters drop; 1 = no refill.", 1)
    pass_rate_threshold: float | None = doc("No-positive-resampling (ScaleRL): retire a prompt once a group "
                                            "of it reaches this pass rate (0.9); None = off.", None)
    topk_logprobs: int = doc("K: record the rollout's top-K token log-probs (DPPO top-K losses need them).", 0)

    # --- reward ---------------------------------------------------------------------------------
    format_weight: float = doc("Weight of the task's format reward in the total reward.", 0.0)
    overlong_buffer: int = doc("L_cache of DAPO's soft overlong punishment: the penalty ramps from 0 at "
                               "L_max - L_cache to -1 at L_max; 0 = off.", 0)
    filters: tuple = doc("Names in rlnb.algos.FILTERS whose keep masks (ANDed) decide which rows enter the "
                         "loss, e.g. ('zero_variance',), ('dynamic_sampling',), ('overlong',).", ())

    # --- advantage ------------------------------------------------------------------------------
    advantage: str = doc("Advantage estimator, a key of rlnb.algos.ADVANTAGES.", "grpo")
    unbiased: bool = doc("Std with Bessel's correction (divide by G-1) in GRPO's normalisation.", True)
    eps: float = doc("Epsilon in the advantage's denominator (GRPO std, MaxRL mean).", 1e-6)
    batch_std_centred: bool = doc("batch_norm: divide by the std of the group-centred rewards "
                                  "(REINFORCE++-baseline) instead of the raw rewards (Lite-PPO).", False)

    # --- policy loss ----------------------------------------------------------------------------
    loss: str = doc("Per-token policy loss, a key of rlnb.algos.POLICY_LOSSES.", "ppo_clip")
    eps_low: float = doc("Lower clip range: ratio clipped below at 1 - eps_low. TRL: epsilon.", 0.2)
    eps_high: float = doc("Upper clip range: ratio clipped above at 1 + eps_high. TRL: epsilon_high.", 0.2)
    aggregation: str = doc("How the per-token loss becomes a scalar, a key of AGGREGATIONS.", "seq-mean-token-mean")
    dual_clip_c: float | None = doc("c of dual-clip PPO: for A < 0 the loss is at most -A c (c > 1, "
                                    "verl uses 3); None = off.", None)
    cispo_cap: float | None = doc("CISPO's IS-weight cap. None = 1 + eps_high (MiniMax-M1, verl); a number "
                                  "= absolute cap (TRL's epsilon_high with loss_type='cispo', e.g. 5.0).", None)
    tau_pos: float = doc("SAPO gate temperature for A > 0.", 1.0)
    tau_neg: float = doc("SAPO gate temperature for A <= 0 (larger decays faster).", 1.05)
    dppo_delta: float = doc("DPPO trust-region radius delta (0.15 for TV, 0.05 for KL variants).", 0.15)
    dppo_cap: float = doc("DPPO cap C on the IS weight, min(rho, C).", 10.0)

    # --- KL and entropy -------------------------------------------------------------------------
    beta: float = doc("KL coefficient; 0 skips the reference model entirely. TRL: beta (kl_coef in "
                      "TRL's PPOTrainer, where the KL sits in the reward).", 0.0)
    kl_estimator: str = doc("KL estimator, a key of rlnb.algos.KL_ESTIMATORS (used in the loss).", "k3")
    kl_in_reward: bool = doc("Put the KL in the reward (r - beta sum_t k1, classic PPO/RLOO) instead of "
                             "in the loss (GRPO).", False)
    kl_target: float | None = doc("Adaptive beta (Ziegler et al. 2019): steer the token-mean KL toward "
                                  "this target; None = fixed beta.", None)
    kl_horizon: int = doc("Horizon of the adaptive-beta controller, in samples.", 10_000)
    entropy_coef: float = doc("Entropy bonus coefficient: loss -= entropy_coef * agg(H); the start value "
                              "when the thermostat is on.", 0.0)
    entropy_target: float | None = doc("Entropy thermostat (Skywork-OR1): target token-mean entropy; the "
                                       "coefficient rises below it and falls above; None = fixed.", None)
    entropy_coef_delta: float = doc("Thermostat step of the entropy coefficient per training step.", 1e-3)
    entropy_coef_max: float = doc("Thermostat upper bound of the entropy coefficient.", 0.05)

    # --- critic (PPO) ---------------------------------------------------------------------------
    critic: bool = doc("PPO with a value head on the policy: per-token GAE advantages instead of the "
                       "group estimator.", False)
    gamma: float = doc("GAE discount (1 for LLMs).", 1.0)
    lam: float = doc("GAE lambda (1 for LLMs).", 1.0)
    whiten_advantages: bool = doc("Whiten GAE advantages over the batch's tokens.", True)
    vf_coef: float = doc("Weight of the value loss in the total loss.", 0.5)
    cliprange_value: float = doc("Clip range of the value update around the rollout's values.", 0.2)

    # --- optimisation ---------------------------------------------------------------------------
    lr: float = doc("Adam learning rate (scaled to the 1M-parameter default model).", 1e-4)
    warmup_steps: int = doc("Linear learning-rate warm-up, in optimizer steps.", 10)
    weight_decay: float = doc("AdamW weight decay.", 0.0)
    max_grad_norm: float = doc("Gradient clipping by global norm (0 disables).", 1.0)
    num_iterations: int = doc("mu: epochs over each batch. TRL: num_iterations.", 1)
    num_mini_batches: int = doc("Optimizer steps per epoch; >1 makes the ratio leave 1 so clipping can fire.", 1)
    fp32_lm_head: bool = doc("Compute the LM head in fp32 (MiniMax-M1, ScaleRL): smaller rollout/train "
                             "mismatch in bf16 models.", False)

    def __post_init__(self):
        if isinstance(self.filters, (list, str)):  # accept a list or one name; store a hashable tuple
            object.__setattr__(self, "filters", (self.filters,) if isinstance(self.filters, str) else tuple(self.filters))
        from rlnb.validate import check_recipe

        check_recipe(self)  # types, ranges, registry names: a bad recipe never exists

    def replace(self, **changes) -> Recipe:
        """A copy with ``changes``; unknown field names raise and list the known ones."""
        known = {f.name for f in dataclasses.fields(self)}
        bad = sorted(set(changes) - known)
        if bad:
            from rlnb.validate import closest

            raise TypeError(f"{bad[0]}: Recipe has no field(s) {bad}; known fields: {sorted(known)}"
                            f"{closest(bad[0], known)}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @staticmethod
    def field_docs() -> dict[str, str]:
        return {f.name: f.metadata.get("doc", "") for f in dataclasses.fields(Recipe)}
