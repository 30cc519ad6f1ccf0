"""Input validation at rlnb's public boundaries.

Every wrong input raises before anything changes, with a message that starts with the argument's name
and says what was expected: ``TypeError`` for a wrong kind of value, ``ValueError`` for a value out of
range or inconsistent with another, ``KeyError`` for an unknown name (listing the known names and
suggesting the closest).

>>> unknown_name("loss", "ppo-clip", ["pg", "ppo_clip"], "policy loss").args[0]
"loss: unknown policy loss 'ppo-clip'; known: ['pg', 'ppo_clip'] (did you mean 'ppo_clip'?)"
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import numbers

import torch

from rlnb.hyper import check_entry_defaults
from rlnb.knobs import MAX_INT, check_kind, check_range, check_value  # noqa: F401  (re-exported)


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


def check_fields(aliases: dict | None = None, **values) -> None:
    """Stage and optimizer arguments that carry a Recipe field, checked against that field's declared kind
    and range (one declaration for both); ``aliases`` maps an argument to its field (``topk`` ->
    ``topk_logprobs``). The message names the argument."""
    knobs = _recipe_cls().knobs()
    for arg, value in values.items():
        check_value(dataclasses.replace(knobs[(aliases or {}).get(arg, arg)], name=arg), value)


def _recipe_cls():
    from rlnb.recipe import Recipe

    return Recipe


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
    from rlnb.algos import extra_inputs

    make = getattr(getattr(estimator, "func", estimator), "probe_inputs", None)
    return make(rewards) if make is not None else {name: torch.ones_like(rewards) for name in extra_inputs(estimator)}


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
    params = list(model.parameters()) if hasattr(model, "parameters") else []
    if not params:
        raise TypeError(f"model: expected a causal LM with weights, got {type(model).__name__} with no parameters")
    if any(p.device.type == "meta" for p in params):
        raise ValueError("model: expected loaded weights, got weights on the meta device (created without loading "
                         "them); load them, e.g. AutoModelForCausalLM.from_pretrained(...) without device_map='meta'")
    if len({p.device for p in params}) > 1:
        raise ValueError(f"model: expected every weight on one device, got {sorted({str(p.device) for p in params})}")
    n_model = model.get_input_embeddings().weight.shape[0]
    if len(tokenizer) > n_model:
        raise ValueError(f"tokenizer: has {len(tokenizer)} tokens but the model's embedding has only {n_model} rows; "
                         "they do not belong together")
    for name in ("eos_token_id", "pad_token_id"):
        if getattr(tokenizer, name, None) is None:
            raise ValueError(f"tokenizer.{name}: expected a token id, got None (set tokenizer.{name[:-3]})")


def check_ref_model(ref_model, model) -> None:
    """A reference policy must be a causal LM on the model's device with the model's vocabulary."""
    if ref_model is None:
        return
    if not callable(ref_model) or not hasattr(ref_model, "parameters"):
        raise TypeError(f"ref_model: expected a causal LM (callable torch module), got {type(ref_model).__name__}")
    ref_params = list(ref_model.parameters())
    if not ref_params or any(p.device.type == "meta" for p in ref_params):
        raise ValueError("ref_model: expected loaded weights, got none or weights on the meta device")
    device = next(model.parameters()).device
    if ref_params[0].device != device:
        raise ValueError(f"ref_model: expected it on the model's device {device}, got {ref_params[0].device}")
    if hasattr(ref_model, "get_output_embeddings") and ref_model.get_output_embeddings() is not None:
        V_ref = ref_model.get_output_embeddings().weight.shape[0]
        V = model.get_output_embeddings().weight.shape[0]
        if V_ref != V:
            raise ValueError(f"ref_model: expected the model's vocabulary of {V} tokens, got {V_ref}")


def context_length(model) -> int | None:
    """The model's context window in tokens (``max_position_embeddings``), when its config says."""
    n = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    return int(n) if isinstance(n, numbers.Integral) else None




# --- plain arguments (not Recipe fields) -------------------------------------------------------------
MAX_COUNT = MAX_INT  # steps, rows, prompts: the knobs' bound, more than any run needs
MAX_SEED = 2**63 - 1


def short(value, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters (a 400-digit number is not worth printing whole)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit - 5]}...({len(text)} chars)"


def check_int(arg: str, value, *, low: int = 0, high: int = MAX_COUNT) -> int:
    """An int (not a bool) in ``[low, high]``; returns it as a plain int."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"{arg}: expected an int, got {short(value)}")
    if not low <= value <= high:
        bound = f">= {low}" if high == MAX_COUNT else f"in [{low}, {high}]"
        raise ValueError(f"{arg}: expected an int {bound}, got {short(value)}")
    return int(value)


def check_number(arg: str, value, *, low: float = -math.inf, high: float = math.inf, low_open: bool = False) -> float:
    """A finite real number (not a bool) in ``[low, high]`` (``(low, high]`` with ``low_open``)."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"{arg}: expected a number, got {short(value)}")
    ok_low = value > low if low_open else value >= low
    if not (math.isfinite(value) and ok_low and value <= high):
        left = "(" if low_open else "["
        raise ValueError(f"{arg}: expected a finite number in {left}{low:g}, {high:g}], got {short(value)}")
    return float(value)


def check_bool(arg: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{arg}: expected True or False, got {short(value)}")
    return value


def check_choice(arg: str, value, choices) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{arg}: expected one of {sorted(choices)}, got {short(value)}{closest(value, choices)}")
    return value


def check_tensor(arg: str, x, *, dim: int | tuple | None = None, floating: bool | None = None,
                 finite: bool = False) -> torch.Tensor:
    """``x`` must be a tensor (not a list or a number) with ``dim`` dimensions, a float (or integer/bool) dtype,
    and with ``finite`` only finite values; NaN and inf are reported by row."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{arg}: expected a torch.Tensor, got {type(x).__name__} (wrap it in torch.tensor(...))")
    dims = (dim,) if isinstance(dim, int) else dim
    if dims is not None and x.dim() not in dims:
        want = " or ".join(f"{d}-D" for d in dims)
        raise ValueError(f"{arg}: expected a {want} tensor, got shape {tuple(x.shape)}")
    if floating is True and not x.is_floating_point():
        raise TypeError(f"{arg}: expected a floating-point tensor, got dtype {x.dtype}")
    if floating is False and (x.is_floating_point() or x.is_complex()):
        raise TypeError(f"{arg}: expected an integer or bool tensor, got dtype {x.dtype}")
    if x.is_complex():
        raise TypeError(f"{arg}: expected a real tensor, got dtype {x.dtype}")
    if finite and x.is_floating_point() and x.numel() and x.device.type != "meta" and not bool(torch.isfinite(x).all()):
        rows = nonfinite_rows(x) if x.dim() else []
        raise ValueError(f"{arg}: expected finite values, got NaN or inf" + (f" in rows {rows}" if rows else ""))
    return x


def check_same_device(**tensors) -> None:
    """Every tensor given (None skipped) on one device."""
    named = [(k, v) for k, v in tensors.items() if isinstance(v, torch.Tensor)]
    devices = {v.device for _, v in named}
    if len(devices) > 1:
        first = named[0]
        other = next((k, v) for k, v in named if v.device != first[1].device)
        raise ValueError(f"{other[0]}: expected a tensor on {first[1].device} like {first[0]}, got one on {other[1].device}")


def check_token_ids(arg: str, ids: torch.Tensor, vocab_size: int) -> None:
    """Token ids must index the vocabulary. Checked on the CPU only: on a GPU the check would wait for the
    device at every call (an out-of-range id there trips a device-side assert instead)."""
    if ids.device.type != "cpu" or not ids.numel():
        return
    bad = (ids < 0) | (ids >= vocab_size)
    if bool(bad.any()):
        rows = torch.nonzero(bad.reshape(bad.shape[0], -1).any(-1)).flatten()[:10].tolist() if ids.dim() else []
        raise ValueError(f"{arg}: expected token ids in [0, {vocab_size}) (the model's vocabulary), got "
                         f"{int(ids[bad][0])} in rows {rows}")


def check_model_inputs(model, **ids) -> None:
    """Token-id tensors handed to ``model``: tensors of integers inside its vocabulary (on the CPU; see
    ``check_token_ids``)."""
    table = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else model.get_output_embeddings()
    vocab = table.weight.shape[0]                                      # (a LoRA reference has only the latter)
    for arg, x in ids.items():
        check_tensor(arg, x, dim=2, floating=False)
        check_token_ids(arg, x, vocab)


def check_device(arg: str, device) -> torch.device:
    """A device this machine has: 'cpu', 'cuda', 'cuda:N' with N < the number of GPUs, 'mps' where available."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"{arg}: expected 'cpu', 'cuda', 'cuda:N' or a torch.device, got {short(device)}") from None
    if dev.type == "cuda":
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0:
            raise ValueError(f"{arg}: expected a device this machine has, got {str(dev)!r} (it has no CUDA GPU)")
        if dev.index is not None and dev.index >= n:
            raise ValueError(f"{arg}: expected a device this machine has, got {str(dev)!r} (it has {n} GPU(s), "
                             f"cuda:0..cuda:{n - 1})")
    elif dev.type == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise ValueError(f"{arg}: expected a device this machine has, got 'mps' (torch.backends.mps is unavailable)")
    elif dev.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"{arg}: expected 'cpu', 'cuda' or 'cuda:N', got {str(dev)!r}")
    return dev


MAX_POOL = 10_000_000  # training prompts held in memory


def check_trainer_args(model, tokenizer, *, seed, ref_model, pool_size, keep_records, safe_update,
                       reward_on_error) -> None:
    """Every ``Trainer(...)`` argument except the task and the recipe (checked where they are built)."""
    check_int("seed", seed, high=MAX_SEED)
    check_int("pool_size", pool_size, low=1, high=MAX_POOL)
    check_int("keep_records", keep_records, low=1)
    check_bool("safe_update", safe_update)
    if reward_on_error not in ("raise", "zero"):
        raise ValueError(f"reward_on_error: expected 'raise' or 'zero', got {short(reward_on_error)}")
    check_model(model, tokenizer)
    check_ref_model(ref_model, model)
