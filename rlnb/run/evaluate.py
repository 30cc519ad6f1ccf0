"""Held-out evaluation: greedy and sampled pass@1, and pass@k with the unbiased estimator."""

from __future__ import annotations

from math import comb

import torch

from rlnb.core.checks import check_context
from rlnb.models.generate import encode_prompts, sample
from rlnb.stages.reward import Rewarder


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct (Chen et al. 2021, arXiv 2107.03374):
    1 - C(n - c, k) / C(n, k).

    >>> pass_at_k(4, 1, 1), pass_at_k(4, 1, 2), pass_at_k(4, 0, 2)
    (0.25, 0.5, 0.0)
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k: expected 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    return 1.0 - comb(n - c, k) / comb(n, k)


def completions_for(model, tokenizer, prompts: list[str], *, max_new_tokens: int, n: int = 1,
                    greedy: bool = True, temperature: float = 1.0, top_p: float = 1.0,
                    generator: torch.Generator | None = None, batch_size: int = 256) -> list[list[str]]:
    """``n`` decoded completions per prompt (a list of lists)."""
    device = next(model.parameters()).device
    rows = [p for p in prompts for _ in range(n)]
    texts: list[str] = []
    for start in range(0, len(rows), batch_size):
        ids, mask = encode_prompts(tokenizer, rows[start : start + batch_size], device)
        out, _, _ = sample(model, ids, mask, max_new_tokens=max_new_tokens, greedy=greedy,
                           temperature=temperature, top_p=top_p, generator=generator,
                           eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
        texts += tokenizer.batch_decode(out, skip_special_tokens=True)
    return [texts[i * n : (i + 1) * n] for i in range(len(prompts))]


def evaluate(model, tokenizer, task, *, n: int = 200, seed: int = 10_000, k: int = 1, greedy: bool = True,
             max_new_tokens: int = 32, temperature: float = 1.0, top_p: float = 1.0,
             rewarder=None) -> dict[str, float]:
    """pass@1 (and pass@k when k > 1, from k samples per prompt) on ``n`` held-out prompts. With k > 1,
    pass@j for the powers of two j < k come from the same k samples (unbiased estimator), for pass@k vs k.

    Held-out: prompts come from ``seed`` (training draws from other seeds). Greedy decoding gives one
    completion per prompt, so pass@k needs ``greedy=False``.

    Completions are scored by ``rewarder`` (default ``Rewarder.for_task(task)``; ``Trainer.evaluate`` passes one
    with the run's ``reward_time_limit`` and ``reward_on_error``): a verifier that hangs or raises is handled as
    in training, never waited on forever. Under ``on_error="zero"`` a failed completion counts as not correct.
    """
    for name, v in (("n", n), ("k", k), ("max_new_tokens", max_new_tokens)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name}: expected a positive int, got {v!r}")
    if greedy and k > 1:
        raise ValueError(f"k: pass@k needs sampling; got k={k} with greedy=True")
    ds = task.dataset(n, seed=seed)
    # what step() refuses, evaluate() refuses too (past the context a model scores 0 without saying why)
    check_context(model, encode_prompts(tokenizer, ds["prompt"])[1].sum(-1).tolist(), max_new_tokens)
    gen = torch.Generator(device=next(model.parameters()).device).manual_seed(seed)
    was_training = model.training
    model.eval()
    try:
        outs = completions_for(model, tokenizer, ds["prompt"], max_new_tokens=max_new_tokens, n=k, greedy=greedy,
                               temperature=temperature, top_p=top_p, generator=gen)
    finally:
        model.train(was_training)
    correct = _correct(rewarder or Rewarder.for_task(task), outs, ds["answer"], ds["prompt"])
    res = {"pass@1": sum(sum(c) / len(c) for c in correct) / len(correct)}
    for j in (*(2**i for i in range(1, k.bit_length()) if 2**i < k), k) if k > 1 else ():
        res[f"pass@{j}"] = sum(pass_at_k(k, sum(c), j) for c in correct) / len(correct)
    res["mean_length"] = sum(len(c) for o in outs for c in o) / max(1, sum(len(o) for o in outs))
    return res


def _correct(rewarder, outs: list[list[str]], answers, prompts) -> list[list[bool]]:
    """Each completion's ``correct`` part > 0, scored in one Rewarder call (one time limit for all of them)."""
    k = len(outs[0])
    flat = [c for o in outs for c in o]
    parts = rewarder.score(flat, [a for a in answers for _ in range(k)], [p for p in prompts for _ in range(k)])
    ok = (parts["correct"] > 0).tolist()
    return [ok[i * k : (i + 1) * k] for i in range(len(outs))]
