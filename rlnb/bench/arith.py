"""The arithmetic side of ``rlnb.bench.vs_trl``: a step's model FLOPs from the model's shapes, the seconds they take
at a measured matmul rate, per stage, and the machine's CPU model."""

from __future__ import annotations

import statistics
import time

import torch


def forward_flops(config, prompt_tokens: float, completion_tokens: float, rows: int) -> float:
    """FLOPs of one forward over ``rows`` sequences: 2 x (matmul weights + LM head) per token, plus attention
    (QK^T and AV: 4 x context x hidden per token and layer, context about half the sequence on average)."""
    H, L, V, inter = config.hidden_size, config.num_hidden_layers, config.vocab_size, config.intermediate_size
    kv = config.num_key_value_heads * getattr(config, "head_dim", H // config.num_attention_heads)
    per_layer = H * H * 2 + H * kv * 2 + 3 * H * inter                    # q, o, k, v, gate/up/down
    tokens = prompt_tokens + completion_tokens
    ctx = tokens / rows / 2
    return 2 * tokens * (L * per_layer + H * V) + 4 * tokens * ctx * H * L


def step_flops(config, prompt_tokens: float, completion_tokens: float, rows: int) -> float:
    """Sampling (one forward's worth) + training forward and backward (three)."""
    return 4 * forward_flops(config, prompt_tokens, completion_tokens, rows)


# stage -> forwards' worth of arithmetic it needs (the backward: two, one for the activations' gradients and one
# for the weights'); the timed stages that hold no model arithmetic (reward, bookkeeping) are left out
STAGE_FORWARDS = {"generate": 1, "update_forward": 1, "loss_forward": 1, "update_other": 2, "backward_optim": 2}


def arithmetic_line(name: str, steps: list[dict], forward: list[float], rate: float) -> str:
    """Per stage: the median measured seconds next to the seconds its FLOPs take at ``rate`` (and the ratio)."""
    parts = []
    for key, n in STAGE_FORWARDS.items():
        if key in steps[0]:
            measured = statistics.median(s[key] for s in steps)
            ideal = statistics.median(n * f for f in forward) / rate
            parts.append(f"{key} {measured:.3f} vs {ideal:.3f} ({ideal / measured:.2f})")
    return f"{name:5s} measured vs arithmetic s (share): " + "  ".join(parts)


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else the platform's processor string."""
    import platform

    try:
        with open("/proc/cpuinfo") as f:
            names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
        return f"{names[0]} ({len(names)} logical CPUs)" if names else platform.processor()
    except OSError:
        return platform.processor() or "unknown"


def matmul_flops_per_s(M: int, K: int, N: int, reps: int = 30, dtype: torch.dtype = torch.float32) -> float:
    """Median FLOP/s of a (M, K) x (K, N) matmul in ``dtype`` on this process's threads."""
    a, b = torch.randn(M, K, dtype=dtype), torch.randn(K, N, dtype=dtype)
    for _ in range(3):
        a @ b
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t0)
    return 2 * M * K * N / statistics.median(times)
