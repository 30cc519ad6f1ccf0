"""What actually runs: a recipe's knobs resolved against the registry entries it chooses.

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

from rlnb.knobs import UNSET

# Recipe field -> the registry (an rlnb.algos attribute) its value names an entry of
ENTRY_FIELDS = {"advantage": "ADVANTAGES", "loss": "POLICY_LOSSES", "aggregation": "AGGREGATIONS",
                "kl_estimator": "KL_ESTIMATORS", "filters": "FILTERS"}
# stage kind -> the Recipe field choosing its entries (the keys Trainer.hyperparameters() returns first)
STAGES = {"advantage": "advantage", "loss": "loss", "aggregation": "aggregation", "kl": "kl_estimator",
          "filters": "filters"}


def entries(recipe, field: str) -> list:
    """The registry functions that Recipe ``field`` chooses (a list: ``filters`` names several)."""
    import rlnb.algos as algos

    registry = getattr(algos, ENTRY_FIELDS[field])
    names = getattr(recipe, field)
    return [registry[n] for n in ((names,) if isinstance(names, str) else names)]


def resolved(fn, recipe) -> dict:
    """``{knob: value}`` that ``fn`` runs with under ``recipe``: the recipe's value, or for an UNSET
    entry knob the function's own default. Structural arguments (``group_size``) are not knobs."""
    from rlnb.algos.registry import knob_names

    params = inspect.signature(getattr(fn, "func", fn)).parameters
    out = {}
    for name in knob_names(fn):
        value = getattr(recipe, name, UNSET)
        out[name] = params[name].default if value is UNSET else value
    return out


def released_knobs(recipe, changes: dict) -> dict:
    """``{knob: UNSET}`` for the entry knobs of the registry entries that ``changes`` swap out (and that
    ``changes`` do not set themselves): a recipe's clip range belongs to its loss."""
    from rlnb.algos.registry import knob_names

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
        out["advantage"] = {"advantage": "gae", **resolved(gae_fn(), recipe)}
    for n, k in knobs.items():
        if k.group not in STAGES and k.group != "meta" and not k.entry:
            out.setdefault(k.group, {})[n] = getattr(recipe, n)
    return out


def gae_fn():
    from rlnb.algos import gae

    return gae


def entry_defaults(name: str) -> dict[str, object]:
    """``{entry: default}`` of knob ``name`` over every registry entry that takes it.

    >>> entry_defaults("eps_high")["cispo"], entry_defaults("eps_high")["ppo_clip"]
    (0.28, 0.2)
    """
    import rlnb.algos as algos
    from rlnb.algos.registry import knob_names

    out = {}
    for reg in ENTRY_FIELDS.values():
        for entry, fn in sorted(getattr(algos, reg).items()):
            if name in knob_names(fn):
                out[entry] = inspect.signature(fn).parameters[name].default
    return out


def check_entry_defaults(recipe) -> None:
    """Each chosen entry's own defaults for UNSET knobs must lie in the knobs' declared ranges (so what
    runs is what the table promises); raises ValueError naming the entry and knob."""
    from rlnb.knobs import check_value

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
