"""Name resolution: a recipe's registry names and knobs resolved against the entries it chooses.

A knob declared with the default ``UNSET`` belongs to registry entries (``eps_low`` to ``ppo_clip`` and
``cispo``, ``eps`` to ``grpo`` and ``maxrl``). Left unset, each chosen entry runs with its own signature
default; set, the recipe's value fills every chosen entry that takes it (``rlnb.algos.bind``).
:func:`hyperparameters` lists the result per stage, the way the Trainer will call each function.

>>> from rlnb import recipes
>>> hyperparameters(recipes.get("grpo", loss="cispo"))["loss"]
{'loss': 'cispo', 'eps_low': 1.0, 'eps_high': 0.28, 'cispo_cap': None}
"""

from __future__ import annotations

import inspect
from dataclasses import fields

import torch

from rlnb.algos.advantages import ADVANTAGES, gae
from rlnb.algos.aggregation import AGGREGATIONS
from rlnb.algos.entropy import ENTROPY_BONUSES
from rlnb.algos.filters import FILTERS
from rlnb.algos.kl import KL_ESTIMATORS
from rlnb.algos.losses import POLICY_LOSSES
from rlnb.algos.registry import bind, extra_inputs, knob_names
from rlnb.algos.rollout_correction import ROLLOUT_CORRECTIONS
from rlnb.core.checks import unknown_name
from rlnb.core.knobs import UNSET, check_value, declared

# Recipe field -> the registry its value names an entry of (every family module is loaded by rlnb.algos)
ENTRY_FIELDS = {"advantage": ADVANTAGES, "loss": POLICY_LOSSES, "aggregation": AGGREGATIONS,
                "kl_estimator": KL_ESTIMATORS, "filters": FILTERS, "rollout_correction": ROLLOUT_CORRECTIONS}
# stage kind -> the Recipe field choosing its entries (the keys Trainer.hyperparameters() returns first)
STAGES = {"advantage": "advantage", "loss": "loss", "aggregation": "aggregation", "kl": "kl_estimator",
          "filters": "filters", "correction": "rollout_correction"}


def entries(recipe, field: str) -> list:
    """The registry functions that Recipe ``field`` chooses (a list: ``filters`` names several)."""
    registry = ENTRY_FIELDS[field]
    names = getattr(recipe, field)
    return [registry[n] for n in ((names,) if isinstance(names, str) else names)]


def resolved(fn, recipe) -> dict:
    """``{knob: value}`` that ``fn`` runs with under ``recipe``: the recipe's value, or for an UNSET
    entry knob the function's own default. Structural arguments (``group_size``) are not knobs."""
    params = inspect.signature(getattr(fn, "func", fn)).parameters
    out = {}
    for name in knob_names(fn):
        value = getattr(recipe, name, UNSET)
        out[name] = params[name].default if value is UNSET else value
    return out


def released_knobs(recipe, changes: dict) -> dict:
    """``{knob: UNSET}`` for the entry knobs of the registry entries that ``changes`` swap out (and that
    ``changes`` do not set themselves): a recipe's clip range belongs to its loss."""
    knobs = type(recipe).knobs()
    out = {}
    for field in ENTRY_FIELDS:
        if field not in changes or changes[field] == getattr(recipe, field):
            continue
        for fn in entries(recipe, field):
            out.update({n: UNSET for n in knob_names(fn) if knobs[n].entry and n not in changes})
    return out


def hyperparameters(recipe) -> dict[str, dict]:
    """Per stage, ``{knob: value}`` of what runs: the five entry stages first ("advantage", "loss",
    "aggregation", "kl", "filters": the entry's name, then its resolved knobs, then the stage's own
    knobs), then every other group of knobs ("sampling", "reward", "entropy", "critic", "optimisation")."""
    knobs = type(recipe).knobs()
    out: dict[str, dict] = {}
    for stage, field in STAGES.items():
        d = {field: getattr(recipe, field)}
        for fn in entries(recipe, field):
            d.update(resolved(fn, recipe))
        d.update({n: getattr(recipe, n) for n, k in knobs.items() if k.group == stage and not k.entry})
        out[stage] = d
    if recipe.critic:  # PPO: GAE from the value head replaces the group estimator
        out["advantage"] = {"advantage": "gae", **resolved(gae, recipe)}
    for n, k in knobs.items():
        if k.group not in STAGES and k.group != "meta" and not k.entry:
            out.setdefault(k.group, {})[n] = getattr(recipe, n)
    return out


def entry_defaults(name: str) -> dict[str, object]:
    """``{entry: default}`` of knob ``name`` over every registry entry that takes it.

    >>> entry_defaults("eps_high")["cispo"], entry_defaults("eps_high")["ppo_clip"]
    (0.28, 0.2)
    """
    out = {}
    for reg in ENTRY_FIELDS.values():
        for entry, fn in sorted(reg.items()):
            if name in knob_names(fn):
                out[entry] = inspect.signature(fn).parameters[name].default
    return out


def check_entry_defaults(recipe) -> None:
    """Each chosen entry's own defaults for UNSET knobs must lie in the knobs' declared ranges (so what
    runs is what the table promises); raises ValueError naming the entry and knob."""
    knobs = type(recipe).knobs()
    for field in ENTRY_FIELDS:
        for fn in entries(recipe, field):
            for name, value in resolved(fn, recipe).items():
                if getattr(recipe, name, UNSET) is UNSET:
                    try:
                        check_value(knobs[name], value)
                    except (TypeError, ValueError) as e:
                        raise ValueError(f"{name}: the default of {getattr(fn, 'registry_name', fn)!r} is outside "
                                         f"the declared knob ({e})") from None


# --- checks of a whole recipe (Recipe.__post_init__ calls check_recipe) ------------------------------
def check_recipe(recipe) -> None:
    """Kinds and ranges of every knob (from its declaration), registry names, the chosen entries' own
    defaults, and the cross-field rules of a ``Recipe``; raises on the first problem."""
    for name, k in recipe.knobs().items():
        check_value(k, getattr(recipe, name))
    r = recipe
    if r.num_mini_batches > r.prompts_per_step:
        raise ValueError(f"num_mini_batches: expected at most prompts_per_step={r.prompts_per_step} "
                         f"(each mini-batch holds whole groups), got {r.num_mini_batches}")
    if r.overlong_buffer > r.max_new_tokens:
        raise ValueError(f"overlong_buffer: expected at most max_new_tokens={r.max_new_tokens}, got {r.overlong_buffer}")
    if r.entropy_target is not None and r.entropy_coef > r.entropy_coef_max:
        raise ValueError(f"entropy_coef: the thermostat (entropy_target set) starts at entropy_coef and stays "
                         f"in [0, entropy_coef_max={r.entropy_coef_max}], got {r.entropy_coef}")
    if r.kl_target is not None and r.beta <= 0:
        raise ValueError(f"beta: the adaptive KL controller (kl_target set) needs a starting beta > 0, got {r.beta}")
    _check_names(r)
    check_entry_defaults(r)


def _check_names(r) -> None:
    for arg, reg in (("advantage", ADVANTAGES), ("loss", POLICY_LOSSES), ("aggregation", AGGREGATIONS),
                     ("kl_estimator", KL_ESTIMATORS), ("entropy_aggregation", ENTROPY_BONUSES)):
        if getattr(r, arg) not in reg:
            raise unknown_name(arg, getattr(r, arg), reg, reg.kind)
    for field, reg in (("filters", FILTERS), ("rollout_correction", ROLLOUT_CORRECTIONS)):
        for i, name in enumerate(getattr(r, field)):
            if name not in reg:
                raise unknown_name(f"{field}[{i}]", name, reg, reg.kind)
    for name in r.rollout_correction:  # a knob without a default (a threshold) raises now, naming it
        probe_correction(bind(ROLLOUT_CORRECTIONS[name], r))
    if r.num_generations < 2 and not r.critic and needs_groups(bind(ADVANTAGES[r.advantage], r)):
        raise ValueError(f"num_generations: the advantage estimator {r.advantage!r} compares completions "
                         f"within a group, so it needs G >= 2 (with G=1 every advantage is 0), got {r.num_generations}")
    if not r.critic:
        probe_advantage(bind(ADVANTAGES[r.advantage], r), r.num_generations)
    if not extra_inputs(POLICY_LOSSES[r.loss]):
        probe_loss(bind(POLICY_LOSSES[r.loss], r))
    if "topk_logp" in extra_inputs(POLICY_LOSSES[r.loss]) and r.topk_logprobs < 1:
        raise ValueError(f"topk_logprobs: the loss {r.loss!r} needs the rollout's top-K log-probs; "
                         f"expected topk_logprobs >= 1, got {r.topk_logprobs}")


def needs_groups(estimator) -> bool:
    """Whether an advantage estimator gives every singleton group (G = 1) a zero advantage: then it needs
    G >= 2 to learn anything. Probed on distinct rewards, so no estimator name is consulted. Extra
    inputs (``rlnb.algos.extra_inputs``: lengths, greedy rewards, all (B,)) are synthesised as ones: unit
    lengths, a greedy reward of 1, neither of which makes distinct rewards' advantages vanish by itself;
    an entry with other kinds of inputs supplies its own (``probe_inputs``)."""
    rewards = torch.tensor([1.0, 0.0, 3.0])
    return bool((estimator(rewards, 1, **probe_inputs(estimator, rewards)) == 0).all())


def probe_advantage(estimator, G: int) -> None:
    """Call a bound estimator once on one group of G distinct rewards (extra inputs as in ``needs_groups``),
    so a setting it rejects (``pass_k`` larger than G) raises its own ValueError when the recipe is made."""
    rewards = torch.arange(G, dtype=torch.float32)
    estimator(rewards, G, **probe_inputs(estimator, rewards))


def probe_inputs(estimator, rewards: torch.Tensor) -> dict:
    """The extra inputs for a probe: the entry's own ``probe_inputs(rewards)`` when it defines one (inputs
    that are not (B,) tensors: GDPO's reward parts, the token baseline's (B, T) tensors), else ones."""
    make = getattr(getattr(estimator, "func", estimator), "probe_inputs", None)
    return make(rewards) if make is not None else {name: torch.ones_like(rewards) for name in extra_inputs(estimator)}


def probe_correction(fn) -> None:
    """Call a bound rollout correction once on a tiny batch, so a missing or bad knob raises its own
    ValueError when the recipe is made."""
    logp = torch.tensor([[-1.0, -2.0]])
    fn(logp, logp, logp, torch.tensor([1.0]), torch.ones_like(logp))


def probe_loss(loss_fn) -> None:
    """Call a bound loss once on a tiny on-policy batch, so settings it rejects together (Clip-Cov's
    ``clip_cov_lb`` >= ``clip_cov_ub``) raise its own ValueError when the recipe is made."""
    logp = torch.tensor([[-1.0, -2.0]])
    loss_fn(logp, logp, torch.tensor([1.0]), torch.ones_like(logp))


# --- the generated table --------------------------------------------------------------------------
def knob_table_markdown(cls) -> str:
    """``docs/knobs.md``'s table: every knob, its symbol, default, range, TRL name and flag."""
    defaults = {f.name: f.default for f in fields(cls)}
    lines = ["| knob | symbol | stage | default | range | TRL (GRPOConfig) | what it does |",
             "|---|---|---|---|---|---|---|"]
    for name, k in declared(cls).items():
        own = ", ".join(f"{e} {v!r}" for e, v in entry_defaults(name).items())
        d = f"entry's own: {own}" if k.entry else f"`{defaults[name]!r}`"
        trl = f"`{k.trl}`" if k.trl else f"none: {k.no_trl}"
        lines.append(f"| `{name}` | {k.symbol or '-'} | {k.group} | {d} | {k.range or '-'} | {trl} | {k.doc} |")
    return "\n".join(lines)


# --- which knobs can act ---------------------------------------------------------------------------
OFF_POLICY_INPUTS = ("rollout_logp",)  # a loss input from another policy than the one differentiated
RATIO_IS_ONE = "ratio is 1 with one update per batch: raise mu (num_iterations) or mini-batches"


def ratio_can_leave_one(recipe) -> bool:
    """Whether the policy ratio can differ from 1 in the loss: the batch is reused (mu > 1 or several
    mini-batches), or the loss reads log-probs of another policy than the one it differentiates."""
    if recipe.num_iterations > 1 or recipe.num_mini_batches > 1 or recipe.bypass_mode:
        return True  # bypass mode: pi_old is the sampler's mu, so the ratio carries the mismatch
    return any(name in OFF_POLICY_INPUTS for name in extra_inputs(POLICY_LOSSES[recipe.loss]))


def inert_knobs(recipe) -> dict[str, str]:
    """``{knob: why it cannot act now}``: an entry knob that no chosen entry takes, and a knob declared
    ``acts="ratio"`` while the ratio cannot leave 1. Read from the declarations and the chosen entries'
    signatures, never from a list of names.

    >>> from rlnb import recipes
    >>> inert = inert_knobs(recipes.get("grpo"))
    >>> inert["eps_low"], inert["cispo_cap"]
    ('ratio is 1 with one update per batch: raise mu (num_iterations) or mini-batches', "the loss 'ppo_clip' does not take cispo_cap")
    >>> "eps_low" in inert_knobs(recipes.get("grpo", num_iterations=2))
    False
    """
    taken = {n for d in hyperparameters(recipe).values() for n in d}
    out = {}
    for name, k in type(recipe).knobs().items():
        if k.entry and name not in taken:
            field = STAGES.get(k.group)
            chosen = f"the {k.group} {getattr(recipe, field)!r}" if field else "no chosen entry"
            out[name] = f"{chosen} does not take {name}"
        elif k.acts == "ratio" and not ratio_can_leave_one(recipe):
            out[name] = RATIO_IS_ONE
        elif k.acts not in ("", "ratio") and (recipe.critic or k.acts not in extra_inputs(ADVANTAGES[recipe.advantage])):
            out[name] = f"the advantage {recipe.advantage!r} reads no {k.acts}"
    return out
