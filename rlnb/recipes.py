"""Named recipes: each composes registry entries with its paper's values, scaled to the toy setting.

Each recipe writes its paper's values for the knobs of the entries it chooses (``eps_low``, ``eps_high``,
...). Overriding an entry (``get("grpo", loss="cispo")``) returns those knobs to the new entry's own
defaults unless you override them too (``Recipe.replace``).

``rlnb.recipes.names()`` lists them; ``rlnb.recipes.get(name, **overrides)`` returns a ``Recipe``.
Every recipe shares the toy budget (P = 16 prompts x G = 8 samples, lr 1e-4, 32 new tokens) unless its
paper's mechanism needs something else; what differs is what the papers differ in.
"""

from __future__ import annotations

import difflib

from rlnb.recipe import Recipe


def reinforce() -> Recipe:
    """REINFORCE (Williams 1992): A = r, loss -A sum_t log pi; the sum divided by the constant L only
    rescales the learning rate. No baseline: the high-variance reference point of the family."""
    return Recipe(name="reinforce", paper="Williams 1992, Machine Learning 8", advantage="reinforce", loss="pg",
                  aggregation="seq-mean-token-sum-norm")


def ppo() -> Recipe:
    """PPO with a critic (Schulman et al. 2017, arXiv 1707.06347; InstructGPT-style RLHF): a value head,
    GAE (gamma = lam = 1), clipped value loss, KL to the reference in the reward, two mini-batches."""
    return Recipe(name="ppo", paper="PPO, arXiv 1707.06347; InstructGPT, arXiv 2203.02155", critic=True,
                  loss="ppo_clip", eps_low=0.2, eps_high=0.2, aggregation="token-mean", beta=0.01, kl_in_reward=True, num_mini_batches=2)


def grpo() -> Recipe:
    """GRPO (DeepSeekMath, arXiv 2402.03300): group-normalised advantages, PPO clip, seq-mean-token-mean.
    DeepSeekMath used beta 0.04; recent practice (and this toy default) is beta 0."""
    return Recipe(name="grpo", paper="DeepSeekMath, arXiv 2402.03300", advantage="grpo", loss="ppo_clip",
                  eps_low=0.2, eps_high=0.2, aggregation="seq-mean-token-mean", beta=0.0)


def rloo() -> Recipe:
    """RLOO (Ahmadian et al., arXiv 2402.14740): leave-one-out baseline, REINFORCE-style (no clipping),
    sequence-level loss, KL in the reward."""
    return Recipe(name="rloo", paper="Back to Basics, arXiv 2402.14740", advantage="rloo", loss="pg",
                  aggregation="seq-mean-token-sum-norm", beta=0.01, kl_in_reward=True)


def dr_grpo() -> Recipe:
    """Dr. GRPO (Liu et al., arXiv 2503.20783): no std normalisation, a constant loss normaliser."""
    return Recipe(name="dr_grpo", paper="Understanding R1-Zero-Like Training, arXiv 2503.20783",
                  advantage="dr_grpo", loss="ppo_clip", eps_low=0.2, eps_high=0.2,
                  aggregation="seq-mean-token-sum-norm")


def dapo() -> Recipe:
    """DAPO (Yu et al., arXiv 2503.14476): clip-higher (0.2 / 0.28), token-mean, overlong shaping and
    filtering, dynamic sampling, no KL. The paper's L_max 20480 / L_cache 4096 leave 16384 tokens free of
    penalty; here L_max 40 / L_cache 8 leave 32 free, above the toy's longest right answers (~26 tokens)
    (with the others' 32 tokens, every correct scratch-work answer on `add` would be penalised)."""
    return Recipe(name="dapo", paper="DAPO, arXiv 2503.14476", advantage="grpo", loss="ppo_clip",
                  eps_low=0.2, eps_high=0.28, aggregation="token-mean", overlong_buffer=8, max_new_tokens=40,
                  filters=("dynamic_sampling", "overlong"), max_gen_rounds=3)


def cispo() -> Recipe:
    """CISPO (MiniMax-M1, arXiv 2506.13585): REINFORCE weighted by the clipped, stop-gradient IS ratio,
    so clipped tokens keep their gradient; no lower bound (eps_low = 1), cap 1 + eps_high = 5."""
    return Recipe(name="cispo", paper="MiniMax-M1, arXiv 2506.13585", advantage="grpo", loss="cispo",
                  eps_low=1.0, eps_high=4.0, aggregation="token-mean", num_mini_batches=2)


def gspo() -> Recipe:
    """GSPO (Qwen, arXiv 2507.18071): sequence-level ratio exp(mean_t log rho) with a tiny clip range
    (3e-4 / 4e-4), seq-mean aggregation, no KL; mini-batches so the ratio moves."""
    return Recipe(name="gspo", paper="GSPO, arXiv 2507.18071", advantage="grpo", loss="gspo", eps_low=3e-4,
                  eps_high=4e-4, aggregation="seq-mean-token-mean", num_mini_batches=2)


def maxrl() -> Recipe:
    """MaxRL (arXiv 2602.02710): A = (r - mean) / mean, which optimises a sum of pass@k; clip 0.2/0.2,
    token-mean, no KL (paper N = 16; 8 here like the others)."""
    return Recipe(name="maxrl", paper="MaxRL, arXiv 2602.02710", advantage="maxrl", loss="ppo_clip",
                  eps_low=0.2, eps_high=0.2, aggregation="token-mean")


def dppo() -> Recipe:
    """DPPO (arXiv 2602.04879), Binary-TV: drop tokens whose probability moved more than delta = 0.15 in
    A's direction, REINFORCE with a capped IS weight elsewhere; mini-batches so the policy moves."""
    return Recipe(name="dppo", paper="DPPO, arXiv 2602.04879", advantage="grpo", loss="dppo_tv", dppo_delta=0.15,
                  dppo_cap=10.0, aggregation="token-mean", num_mini_batches=2)


def scalerl() -> Recipe:
    """ScaleRL (arXiv 2510.13786): CISPO with a truncated IS cap, prompt-level aggregation, batch-level
    advantage normalisation, FP32 LM head, zero-variance filtering, no-positive-resampling (0.9)."""
    return Recipe(name="scalerl", paper="The Art of Scaling RL Compute, arXiv 2510.13786", advantage="batch_norm",
                  loss="cispo", eps_low=1.0, eps_high=4.0, aggregation="prompt-mean", fp32_lm_head=True,
                  filters=("zero_variance",), pass_rate_threshold=0.9)


def gpg() -> Recipe:
    """GPG (Chu et al., arXiv 2504.02546): group-centred rewards scaled by alpha, verl 0.9.1's B / (rows with a
    nonzero reward) (``gpg_alpha_nonzero=False``: the paper's B / (B - M), M the rows of groups with equal
    rewards), no std, plain REINFORCE loss averaged over the batch's tokens; no
    clipping, no KL, no reference model."""
    return Recipe(name="gpg", paper="GPG, arXiv 2504.02546", advantage="gpg", loss="pg", aggregation="token-mean",
                  beta=0.0)


def gdpo() -> Recipe:
    """GDPO (arXiv 2601.05242): each reward part (correctness, format) group-normalised on its own, then
    summed and whitened over the batch; GRPO's clipped loss and aggregation otherwise. The parts weigh
    the same (format_weight 1, verl's default weights of 1)."""
    return Recipe(name="gdpo", paper="GDPO, arXiv 2601.05242", advantage="gdpo", loss="ppo_clip", eps_low=0.2,
                  eps_high=0.2, aggregation="seq-mean-token-mean", format_weight=1.0)


RECIPES = {f.__name__: f for f in (reinforce, ppo, grpo, rloo, dr_grpo, dapo, cispo, gspo, maxrl, dppo, scalerl,
                                   gpg, gdpo)}


def names() -> list[str]:
    return list(RECIPES)


def get(name: str | Recipe, **overrides) -> Recipe:
    """The recipe ``name`` with ``overrides`` applied (unknown fields raise and list the known ones)."""
    if isinstance(name, Recipe):
        return name.replace(**overrides)
    if not isinstance(name, str):
        raise TypeError(f"recipe: expected a recipe name (one of {names()}) or a Recipe, got {name!r:.60}")
    if name not in RECIPES:
        close = difflib.get_close_matches(str(name), names(), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise KeyError(f"recipe: unknown recipe {name!r}; known: {names()}{hint}")
    return RECIPES[name]().replace(**overrides)


TABLE_FIELDS = ["advantage", "loss", "aggregation"]


def _entry_cell(r: Recipe, stage: str) -> str:
    """``name`` and the knobs it runs with under ``r`` (resolved: UNSET shows the entry's own default)."""
    hp = dict(r.hyperparameters()[stage])
    name = hp.pop(stage)
    knobs = ", ".join(f"{k}={v!r}" for k, v in hp.items() if k not in r.knobs() or r.knobs()[k].entry)
    return f"`{name}`" + (f" ({knobs})" if knobs else "")


def table_markdown() -> str:
    """The README's recipe table: each recipe's registry entries with the knobs they run with, and the
    other knobs it changes from the Recipe defaults."""
    base, knobs = Recipe(), Recipe.knobs()
    lines = ["| recipe | advantage | loss | aggregation | other settings (vs. defaults) | paper |",
             "|---|---|---|---|---|---|"]
    for name in names():
        r = get(name)
        diffs = [f"`{k}={getattr(r, k)!r}`" for k, kn in knobs.items()
                 if kn.group != "meta" and not kn.entry and k not in TABLE_FIELDS and getattr(r, k) != getattr(base, k)]
        cells = [f"`{name}`", *(_entry_cell(r, k) for k in TABLE_FIELDS), ", ".join(diffs) or "-", r.paper]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
