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
import math
import numbers

import torch

from rlnb.core.knobs import MAX_COUNT, MAX_INT, MAX_SEED, check_kind, check_range, check_value, short  # noqa: F401  (re-exported)


def closest(name, known) -> str:
    """`` (did you mean 'x'?)`` for the closest known name, or an empty string."""
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_name(arg: str, name, known, kind: str) -> KeyError:
    """The KeyError for an unknown registry name: names the argument, lists the known names."""
    known = sorted(known)
    return KeyError(f"{arg}: unknown {kind} {name!r}; known: {known}{closest(name, known)}")


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
    if params[0].device.type == "cpu" and any(p.dtype == torch.float16 for p in params):
        raise ValueError("model: float16 weights on the CPU overflow to NaN within a step or two (the optimizer "
                         "writes them back in float16); use model.float(), or model.to(torch.bfloat16)")
    n_model = model.get_input_embeddings().weight.shape[0]
    if len(tokenizer) > n_model:
        raise ValueError(f"tokenizer: has {len(tokenizer)} tokens but the model's embedding has only {n_model} rows; "
                         "they do not belong together")
    for name in ("eos_token_id", "pad_token_id"):
        if getattr(tokenizer, name, None) is None:
            raise ValueError(f"tokenizer.{name}: expected a token id, got None (set tokenizer.{name[:-3]})")


def check_causal_lm(name: str, obj) -> None:
    """``obj`` is a causal LM: a callable torch module with an LM head (``get_output_embeddings``)."""
    if not callable(obj) or not hasattr(obj, "parameters") or not hasattr(obj, "get_output_embeddings"):
        raise TypeError(f"{name}: expected a causal LM (a transformers model with an LM head, like the policy), "
                        f"got {type(obj).__name__}")


def check_ref_model(ref_model, model) -> None:
    """A reference policy must be a causal LM on the model's device with the model's vocabulary."""
    if ref_model is None:
        return
    check_causal_lm("ref_model", ref_model)
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


def check_context(model, prompt_lengths: list[int], max_new_tokens: int) -> None:
    """Each prompt plus ``max_new_tokens`` must fit in the model's context window (when its config says)."""
    ctx = context_length(model)
    if ctx is None:
        return
    too_long = [i for i, n in enumerate(prompt_lengths) if n + max_new_tokens > ctx]
    if too_long:
        i = too_long[0]
        raise ValueError(f"prompts: row {i} has {prompt_lengths[i]} tokens, and with max_new_tokens={max_new_tokens} "
                         f"that exceeds the model's context of {ctx} tokens (rows {too_long[:10]}); shorten the "
                         "prompts or lower max_new_tokens")


def context_length(model) -> int | None:
    """The model's context window in tokens (``max_position_embeddings``), when its config says."""
    n = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    return int(n) if isinstance(n, numbers.Integral) else None




# --- plain arguments (not Recipe fields) -------------------------------------------------------------


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
                       reward_on_error, reward_time_limit=None) -> None:
    """Every ``Trainer(...)`` argument except the task and the recipe (checked where they are built)."""
    check_int("seed", seed, high=MAX_SEED)
    check_int("pool_size", pool_size, low=1, high=MAX_POOL)
    check_int("keep_records", keep_records, low=1)
    check_bool("safe_update", safe_update)
    if reward_on_error not in ("raise", "zero"):
        raise ValueError(f"reward_on_error: expected 'raise' or 'zero', got {short(reward_on_error)}")
    if reward_time_limit is not None and (isinstance(reward_time_limit, bool) or not isinstance(
            reward_time_limit, (int, float)) or not math.isfinite(reward_time_limit) or reward_time_limit <= 0):
        raise ValueError(f"reward_time_limit: expected None (no limit) or a number of seconds > 0, got "
                         f"{short(reward_time_limit)}")
    check_model(model, tokenizer)
    check_ref_model(ref_model, model)
