"""Per-step controllers: adaptive beta (KL) and the entropy thermostat, built from a recipe.

Each controller is called after an update with its ``UpdateStats`` and sets the coefficient the next
step uses; it returns the metrics to log. Their state is one float each, saved in checkpoints.
"""

from __future__ import annotations

from rlnb.algos import AdaptiveKLController, EntropyThermostat


class AdaptiveBeta:
    """beta follows the observed token-mean KL toward ``kl_target`` (in the loss or in the reward)."""

    def __init__(self, recipe, trainer):
        self.trainer = trainer
        self.ctl = AdaptiveKLController(target=recipe.kl_target, horizon=recipe.kl_horizon, beta=recipe.beta)
        self.in_reward = recipe.kl_in_reward

    def __call__(self, batch, stats) -> dict:
        if self.in_reward:  # token-mean k1 of the rollout, the quantity the reward penalised
            observed = float(((batch.old_logp - batch.ref_logp) * batch.mask).sum() / batch.mask.sum().clamp(min=1))
        else:
            observed = stats.kl
        beta = self.ctl.update(observed, n_steps=batch.B)
        self.set(beta)
        return {"beta": beta}

    def set(self, beta: float) -> None:
        self.ctl.beta = beta
        if self.in_reward:
            self.trainer.rewarder.kl_coef = beta
        else:
            self.trainer.updater.beta = beta

    def state(self) -> float:
        return self.ctl.beta


class Thermostat:
    """The entropy coefficient rises while entropy is below ``entropy_target`` and falls above it."""

    def __init__(self, recipe, trainer):
        self.trainer = trainer
        self.th = EntropyThermostat(recipe.entropy_target, coef=recipe.entropy_coef, delta=recipe.entropy_coef_delta,
                                    coef_min=0.0, coef_max=recipe.entropy_coef_max, gate=False)

    def __call__(self, batch, stats) -> dict:
        self.th.update(stats.entropy)
        self.set(self.th.coef)
        return {"entropy_coef": self.th.coef}

    def set(self, coef: float) -> None:
        self.th.coef = coef
        self.trainer.updater.entropy_coef = coef

    def state(self) -> float:
        return self.th.coef


def build_controllers(recipe, trainer) -> list:
    out = []
    if recipe.kl_target is not None:  # the Recipe checked beta > 0
        out.append(AdaptiveBeta(recipe, trainer))
    if recipe.entropy_target is not None:
        out.append(Thermostat(recipe, trainer))
    return out
