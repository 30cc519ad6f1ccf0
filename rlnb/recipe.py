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
    max_new_tokens: int = doc("Longest completion in tokens (TRL: max_completion_length).", 32)

    # --- reward ---------------------------------------------------------------------------------
    format_weight: float = doc("Weight of the task's format reward in the total reward.", 0.0)

    # --- advantage ------------------------------------------------------------------------------
    advantage: str = doc("Advantage estimator, a key of rlnb.algos.ADVANTAGES.", "grpo")
    unbiased: bool = doc("Std with Bessel's correction (divide by G-1) in GRPO's normalisation.", True)
    eps: float = doc("Epsilon in the advantage's denominator (GRPO std, MaxRL mean).", 1e-6)

    # --- policy loss ----------------------------------------------------------------------------
    loss: str = doc("Per-token policy loss, a key of rlnb.algos.POLICY_LOSSES.", "ppo_clip")
    eps_low: float = doc("Lower clip range: ratio clipped below at 1 - eps_low. TRL: epsilon.", 0.2)
    eps_high: float = doc("Upper clip range: ratio clipped above at 1 + eps_high. TRL: epsilon_high.", 0.2)
    aggregation: str = doc("How the per-token loss becomes a scalar, a key of AGGREGATIONS.", "seq-mean-token-mean")

    # --- KL and entropy -------------------------------------------------------------------------
    beta: float = doc("KL coefficient; 0 skips the reference model entirely. TRL: beta.", 0.0)
    kl_estimator: str = doc("KL estimator, a key of rlnb.algos.KL_ESTIMATORS.", "k3")
    entropy_coef: float = doc("Entropy bonus coefficient: loss -= entropy_coef * agg(H).", 0.0)

    # --- optimisation ---------------------------------------------------------------------------
    lr: float = doc("Adam learning rate (scaled to the 1M-parameter default model).", 1e-4)
    warmup_steps: int = doc("Linear learning-rate warm-up, in optimizer steps.", 10)
    weight_decay: float = doc("AdamW weight decay.", 0.0)
    max_grad_norm: float = doc("Gradient clipping by global norm (0 disables).", 1.0)
    num_iterations: int = doc("mu: epochs over each batch. TRL: num_iterations.", 1)
    num_mini_batches: int = doc("Optimizer steps per epoch; >1 makes the ratio leave 1 so clipping can fire.", 1)

    def replace(self, **changes) -> Recipe:
        """A copy with ``changes``; unknown field names raise and list the known ones."""
        known = {f.name for f in dataclasses.fields(self)}
        bad = sorted(set(changes) - known)
        if bad:
            raise TypeError(f"Recipe has no field(s) {bad}; known fields: {sorted(known)}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @staticmethod
    def field_docs() -> dict[str, str]:
        return {f.name: f.metadata.get("doc", "") for f in dataclasses.fields(Recipe)}
