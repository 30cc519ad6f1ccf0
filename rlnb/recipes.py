"""Named recipes: each a few lines composing registry entries with paper defaults scaled to the toy.

``rlnb.recipes.names()`` lists them; ``rlnb.recipes.get(name, **overrides)`` returns a ``Recipe``.
"""

from __future__ import annotations

import difflib

from rlnb.recipe import Recipe


def grpo() -> Recipe:
    """GRPO (DeepSeekMath, arXiv 2402.03300): group-normalised advantages, PPO clip, seq-mean-token-mean.
    DeepSeekMath used beta 0.04; recent practice (and this toy default) is beta 0."""
    return Recipe(name="grpo", paper="DeepSeekMath, arXiv 2402.03300", advantage="grpo", loss="ppo_clip",
                  eps_low=0.2, eps_high=0.2, aggregation="seq-mean-token-mean", beta=0.0)


RECIPES = {"grpo": grpo}


def names() -> list[str]:
    return sorted(RECIPES)


def get(name: str, **overrides) -> Recipe:
    """The recipe ``name`` with ``overrides`` applied (unknown fields raise and list the known ones)."""
    if isinstance(name, Recipe):
        return name.replace(**overrides)
    if name not in RECIPES:
        close = difflib.get_close_matches(str(name), names(), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise KeyError(f"recipe: unknown recipe {name!r}; known: {names()}{hint}")
    return RECIPES[name]().replace(**overrides)
