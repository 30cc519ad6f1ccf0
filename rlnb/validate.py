"""Input validation at rlnb's public boundaries.

Every wrong input raises before anything changes, with a message that starts with the argument's name
and says what was expected: ``TypeError`` for a wrong kind of value, ``ValueError`` for a value out of
range or inconsistent with another, ``KeyError`` for an unknown name (listing the known names and
suggesting the closest).

>>> unknown_name("loss", "ppo-clip", ["pg", "ppo_clip"], "policy loss").args[0]
"loss: unknown policy loss 'ppo-clip'; known: ['pg', 'ppo_clip'] (did you mean 'ppo_clip'?)"
"""

from __future__ import annotations

import difflib
import numbers

import torch

from rlnb.hyper import check_entry_defaults
from rlnb.knobs import check_kind, check_range, check_value  # noqa: F401  (re-exported)


def closest(name, known) -> str:
    """`` (did you mean 'x'?)`` for the closest known name, or an empty string."""
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_name(arg: str, name, known, kind: str) -> KeyError:
    """The KeyError for an unknown registry name: names the argument, lists the known names."""
    known = sorted(known)
    return KeyError(f"{arg}: unknown {kind} {name!r}; known: {known}{closest(name, known)}")


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
    from rlnb.algos import ADVANTAGES, AGGREGATIONS, FILTERS, KL_ESTIMATORS, POLICY_LOSSES, bind, extra_inputs

    for arg, reg in (("advantage", ADVANTAGES), ("loss", POLICY_LOSSES), ("aggregation", AGGREGATIONS),
                     ("kl_estimator", KL_ESTIMATORS)):
        if getattr(r, arg) not in reg:
            raise unknown_name(arg, getattr(r, arg), reg, reg.kind)
    for i, name in enumerate(r.filters):
        if name not in FILTERS:
            raise unknown_name(f"filters[{i}]", name, FILTERS, FILTERS.kind)
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
    lengths, a greedy reward of 1, neither of which makes distinct rewards' advantages vanish by itself."""
    from rlnb.algos import extra_inputs

    rewards = torch.tensor([1.0, 0.0, 3.0])
    extras = {name: torch.ones_like(rewards) for name in extra_inputs(estimator)}
    return bool((estimator(rewards, 1, **extras) == 0).all())


def probe_advantage(estimator, G: int) -> None:
    """Call a bound estimator once on one group of G distinct rewards (extra inputs as in ``needs_groups``),
    so a setting it rejects (``pass_k`` larger than G) raises its own ValueError when the recipe is made."""
    from rlnb.algos import extra_inputs

    rewards = torch.arange(G, dtype=torch.float32)
    estimator(rewards, G, **{name: torch.ones_like(rewards) for name in extra_inputs(estimator)})


def probe_loss(loss_fn) -> None:
    """Call a bound loss once on a tiny on-policy batch, so settings it rejects together (Clip-Cov's
    ``clip_cov_lb`` >= ``clip_cov_ub``) raise its own ValueError when the recipe is made."""
    logp = torch.tensor([[-1.0, -2.0]])
    loss_fn(logp, logp, torch.tensor([1.0]), torch.ones_like(logp))


def nonfinite_rows(x: torch.Tensor, limit: int = 10) -> list[int]:
    """Indices of the rows (dim 0) of ``x`` holding NaN or inf, at most ``limit`` of them."""
    bad = ~torch.isfinite(x.reshape(x.shape[0], -1)).all(-1)
    return torch.nonzero(bad).flatten()[:limit].tolist()


def check_model(model, tokenizer) -> None:
    """A causal LM and its tokenizer: the tokenizer's ids must exist in the model, EOS and PAD must be set."""
    if not hasattr(model, "get_input_embeddings") or not callable(model):
        raise TypeError(f"model: expected a Hugging Face causal LM (a torch module with get_input_embeddings), "
                        f"got {type(model).__name__}")
    if not callable(tokenizer) or not hasattr(tokenizer, "batch_decode"):
        raise TypeError(f"tokenizer: expected a Hugging Face tokenizer, got {type(tokenizer).__name__}")
    n_model = model.get_input_embeddings().weight.shape[0]
    if len(tokenizer) > n_model:
        raise ValueError(f"tokenizer: has {len(tokenizer)} tokens but the model's embedding has only {n_model} rows; "
                         "they do not belong together")
    for name in ("eos_token_id", "pad_token_id"):
        if getattr(tokenizer, name, None) is None:
            raise ValueError(f"tokenizer.{name}: expected a token id, got None (set tokenizer.{name[:-3]})")


def context_length(model) -> int | None:
    """The model's context window in tokens (``max_position_embeddings``), when its config says."""
    n = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    return int(n) if isinstance(n, numbers.Integral) else None


def check_int(arg: str, value, *, low: int = 0) -> None:
    """An int (not a bool) >= ``low``."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"{arg}: expected an int, got {value!r}")
    if value < low:
        raise ValueError(f"{arg}: expected an int >= {low}, got {value!r}")
