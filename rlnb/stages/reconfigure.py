"""Changing a trainer's recipe and KL reference between steps: the bodies of ``Trainer.set_recipe`` and
``Trainer.use_reference`` (the Trainer's methods are the API and hold the owner check), and what the rebuilt stages
run with. A recipe the stages refuse changes nothing (``put_back_on_error``)."""

from __future__ import annotations

import contextlib
import copy

from rlnb.recipe import Recipe
from rlnb.stages.optim import set_schedule
from rlnb.stages.reward import Rewarder
from rlnb.stages.update import Updater

# what set_recipe rebuilds, and puts back when the new recipe is refused
REBUILT = ("recipe", "ref_model", "pass_rates", "sampler", "rewarder", "refill", "valuer", "advantager", "updater",
           "controllers")


def swap_recipe(trainer, new: Recipe, *, in_step: bool, rebuild) -> Recipe:
    """Run ``trainer`` with recipe ``new`` from its next step: checked first, then the reference set if beta turns on,
    the stages rebuilt by ``rebuild()`` (controllers that survive keep their coefficients), and the optimizer's
    learning rate, warm-up and weight decay set. Anything refused leaves the trainer as it was."""
    if in_step:
        raise RuntimeError("reconfigure: called during a step; knobs change between steps")
    if not isinstance(new, Recipe):
        raise TypeError(f"recipe: expected a Recipe, got {type(new).__name__}")
    if new.critic != trainer.recipe.critic:
        raise ValueError(f"critic: cannot switch the value head {'on' if new.critic else 'off'} mid-run; "
                         "build a new Trainer")
    with put_back_on_error(trainer, REBUILT):  # a recipe the stages refuse (a knob checked against the model, say)
        if new.beta > 0 and trainer.ref_model is None:
            trainer.use_reference("start", rebuild=False)
        states = {type(c): c.state() for c in trainer.controllers}
        trainer.recipe = new
        rebuild()
        for c in trainer.controllers:  # a controller that survives keeps its coefficient
            if type(c) in states:
                c.set(states[type(c)])
    set_schedule(trainer.optimizer, trainer.scheduler, lr=new.lr, warmup_steps=new.warmup_steps,
                 weight_decay=new.weight_decay)
    return new


def reference_for(ref_model, model, start_weights: dict | None, *, limit: int):
    """The KL reference ``ref_model`` names: a model as given, ``"copy"`` (a frozen copy of ``model`` now), ``"start"``
    (a frozen copy with ``start_weights``, kept for models up to ``limit`` parameters), or None."""
    if isinstance(ref_model, str) and ref_model not in ("copy", "start"):
        raise ValueError(f"ref_model: expected a model, 'copy', 'start' or None, got {ref_model!r}")
    if ref_model == "start" and start_weights is None:
        raise ValueError("beta: turning the KL on mid-run needs the starting weights, which are kept only for "
                         f"models up to {limit:,} parameters; build the Trainer with beta > 0 or pass ref_model=")
    if not isinstance(ref_model, str):
        return ref_model
    ref = copy.deepcopy(model).eval().requires_grad_(False)
    if ref_model == "start":
        ref.load_state_dict(start_weights)
    return ref


def running_hyperparameters(r: Recipe, rewarder: Rewarder, updater: Updater) -> dict[str, dict]:
    """``r.hyperparameters()`` with beta and the entropy coefficient as the built stages hold them now (controllers
    move them between steps)."""
    hp = r.hyperparameters()
    hp["kl"]["beta"] = rewarder.kl_coef if r.kl_in_reward else updater.beta
    hp["entropy"]["entropy_coef"] = updater.entropy_coef
    return hp


def knob_value(hp: dict[str, dict], r: Recipe, name: str):
    """Knob ``name``'s value in the running hyperparameters ``hp``, else the recipe's own (UNSET when left to an
    entry); KeyError naming the known knobs for a name that is no knob."""
    for stage in hp.values():
        if name in stage:
            return stage[name]
    if name not in r.knobs():
        raise KeyError(f"name: {name!r} is not a Recipe knob; known: {sorted(r.knobs())}")
    return getattr(r, name)


@contextlib.contextmanager
def put_back_on_error(owner, names: tuple[str, ...]):
    """Run the block; if it raises, put ``owner``'s attributes ``names`` back as they were, and the pass-rate
    history's threshold (``build.pass_rates_for`` changes it in place), then re-raise."""
    saved = {k: getattr(owner, k) for k in names}
    rates = getattr(owner, "pass_rates", None)
    threshold = None if rates is None else rates.threshold
    try:
        yield
    except BaseException:
        for k, v in saved.items():
            setattr(owner, k, v)
        if rates is not None:
            rates.threshold = threshold
        raise
