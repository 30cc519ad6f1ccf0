"""What PPO's four models cost in memory, against the group-baseline setup (GRPO and its family).

PPO as used for RLHF (InstructGPT, arXiv 2203.02155) holds four models of the policy's size: the trainable
policy, the rollout copy that samples (an inference engine's weights), the frozen reference for the KL term,
and the trainable value model (the critic). GRPO (DeepSeekMath, arXiv 2402.03300) replaces the critic by the
mean reward of a group of samples, so one trainable model goes away.

Two kinds of memory, accounted separately:

- **model state**, bytes per parameter: a trainable model holds weights, gradients and Adam's two moments
  (plus an fp32 master copy in mixed precision); a frozen one holds weights only (``PRECISIONS``).
- **activations**: the bytes autograd saves for the backward pass during a training forward. Only trainable
  models keep them (the rollout and reference run under ``no_grad``). ``saved_activation_bytes`` measures
  them on a real model; ``trunk_activation_bytes`` extends a 1- and 2-layer measurement to a deep config.
"""

from __future__ import annotations

import torch

# bytes per parameter: (weights, gradients, optimizer state, fp32 master weights) for a trainable model
PRECISIONS = {
    "fp32": dict(weights=4, grads=4, adam=8, master=0),          # everything fp32: the CPU toy
    "bf16-mixed": dict(weights=2, grads=2, adam=8, master=4),    # bf16 compute, fp32 Adam and master: GPU practice
}

# the models each setup keeps, and whether each is trained
SETUPS = {
    "ppo": {"policy": True, "rollout": False, "reference": False, "critic": True},
    "group baseline": {"policy": True, "rollout": False, "reference": False},
}


def model_state_bytes(n_params: int, *, trainable: bool, precision: str = "bf16-mixed") -> int:
    """Bytes of one model's state: weights only when frozen; weights, gradients, Adam moments (and fp32
    master weights) when trained.

    >>> model_state_bytes(10, trainable=False, precision="fp32"), model_state_bytes(10, trainable=True, precision="fp32")
    (40, 160)
    >>> model_state_bytes(10, trainable=True)   # bf16-mixed: 2 + 2 + 8 + 4 bytes per parameter
    160
    """
    if isinstance(n_params, bool) or not isinstance(n_params, int) or n_params < 0:
        raise ValueError(f"n_params: expected a non-negative int, got {n_params!r}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision: expected one of {sorted(PRECISIONS)}, got {precision!r}")
    b = PRECISIONS[precision]
    per = b["weights"] + (b["grads"] + b["adam"] + b["master"] if trainable else 0)
    return n_params * per


def setup_memory(n_params: int, *, setup: str, activations: int = 0, precision: str = "bf16-mixed",
                 reference: bool = True) -> dict[str, int]:
    """``{model: bytes}`` for one setup of ``SETUPS``, every model of the policy's size (n_params), plus
    ``"activations"``: ``activations`` bytes (one trainable model's training forward) per trained model.
    ``reference=False`` leaves out the reference model (recipes with beta = 0 need none).

    >>> m = setup_memory(10, setup="ppo", activations=5, precision="fp32")
    >>> m["policy"], m["critic"], m["rollout"], m["activations"], sum(m.values())
    (160, 160, 40, 10, 410)
    """
    if setup not in SETUPS:
        raise ValueError(f"setup: expected one of {sorted(SETUPS)}, got {setup!r}")
    if isinstance(activations, bool) or not isinstance(activations, int) or activations < 0:
        raise ValueError(f"activations: expected a non-negative int (bytes), got {activations!r}")
    out = {name: model_state_bytes(n_params, trainable=train, precision=precision)
           for name, train in SETUPS[setup].items() if reference or name != "reference"}
    out["activations"] = activations * sum(SETUPS[setup].values())
    return out


def critic_share(n_params: int, *, activations: int = 0, precision: str = "bf16-mixed", reference: bool = True) -> float:
    """The share of PPO's memory that dropping the critic saves: 1 - group baseline / PPO.

    >>> round(critic_share(10, precision="fp32"), 4)   # 1 - (16 + 4 + 4) / (16 + 4 + 4 + 16)
    0.4
    """
    kw = dict(activations=activations, precision=precision, reference=reference)
    ppo = sum(setup_memory(n_params, setup="ppo", **kw).values())
    return 1 - sum(setup_memory(n_params, setup="group baseline", **kw).values()) / ppo


def saved_activation_bytes(module: torch.nn.Module, *args, **kwargs) -> int:
    """Bytes autograd saves for the backward pass while ``module(*args, **kwargs)`` runs with gradients on.

    Counted by storage: a storage that several saved tensors (views) share counts once, whole, since that
    is what the backward keeps alive; a parameter's storage (and any view of it, such as the transposed
    weight a linear layer saves) is not an activation and is left out.
    """
    params = {p.untyped_storage().data_ptr() for p in module.parameters()}
    held: dict[int, int] = {}
    alive: list[torch.Tensor] = []       # keeps every saved tensor alive so no address is reused during the count

    def pack(t: torch.Tensor):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in params:
            held[ptr] = t.untyped_storage().nbytes()
            alive.append(t)
        return t

    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        module(*args, **kwargs)
    return sum(held.values())


def decoder_activation_bytes(model, *, batch: int, seq: int) -> int:
    """``saved_activation_bytes`` of a causal LM's decoder trunk (everything up to the final hidden states,
    without the LM head) on a ``(batch, seq)`` block of token ids, no padding."""
    for name, v in (("batch", batch), ("seq", seq)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name}: expected a positive int, got {v!r}")
    dev = next(model.parameters()).device
    ids = torch.zeros(batch, seq, dtype=torch.long, device=dev)                   # (batch, seq)
    return saved_activation_bytes(model.get_decoder(), input_ids=ids, attention_mask=torch.ones_like(ids),
                                  use_cache=False)


def trunk_activation_bytes(config, *, batch: int, seq: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> int:
    """The decoder trunk's training activations for a model of ``config`` without building all of it:
    measured on random 1- and 2-layer copies (a small vocabulary: the embedding saves only the token ids)
    and extended linearly, ``base + n_layers * per_layer``, since every layer is the same shape; ``dtype`` is
    the compute precision (bf16 for a mixed-precision run: what it saves is what it computes in). Exact when
    the layers are identical (tested against a full model); a 24-layer, 0.5B-parameter shape runs in seconds.
    """
    from transformers import AutoModelForCausalLM

    sizes = []
    for n in (1, 2):
        d = {**config.to_dict(), "num_hidden_layers": n, "vocab_size": 64, "bos_token_id": 0, "eos_token_id": 0,
             "pad_token_id": 0}
        if d.get("layer_types"):
            d["layer_types"] = d["layer_types"][:n]
        cfg = config.__class__.from_dict(d)
        torch.manual_seed(seed)
        sizes.append(decoder_activation_bytes(AutoModelForCausalLM.from_config(cfg).to(dtype), batch=batch, seq=seq))
    per_layer = sizes[1] - sizes[0]
    return sizes[0] + (config.num_hidden_layers - 1) * per_layer


def count_parameters(config) -> int:
    """Parameters of a model of ``config``, counted on the ``meta`` device (no memory, no download)."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def logits_bytes(*, batch: int, seq: int, vocab: int, bytes_per: int = 4) -> int:
    """Bytes of the full (batch, seq, vocab) fp32 logits a plain LM head saves for its log-softmax (a fused
    head never holds them; the critic's value head has no vocabulary at all).

    >>> logits_bytes(batch=2, seq=3, vocab=5)
    120
    """
    return batch * seq * vocab * bytes_per
