"""Credit per token by Monte Carlo: the value of every prefix of a completion, measured by sampling.

Outcome rewards score a whole completion, so GRPO gives each of its tokens the same advantage. VinePPO
(Kazemnejad et al. 2024, arXiv 2410.01679) measures instead what each token changed: the value of a prefix

    V(s_t) = E[ R(prompt + o_1..o_t + continuation) ],   continuation ~ pi( . | prompt + o_1..o_t)

is estimated as the mean reward of K continuations sampled from it, and token t's advantage is
V(s_t) - V(s_{t-1}): the change in the chance of being right that the token caused. No critic is learned;
the price is K continuations per prefix.
"""

from __future__ import annotations

import torch

from rlnb import tasks as _tasks
from rlnb.batch import Batch
from rlnb.models.generate import sample
from rlnb.stages.reward import Rewarder

MAX_SEQUENCES = 2048  # continuations decoded in one call (memory bound; results do not depend on it)


def prefix_values(model, tokenizer, batch: Batch, task, *, K: int = 8, rows=None, temperature: float = 1.0,
                  top_p: float = 1.0, max_new_tokens: int | None = None, generator: torch.Generator | None = None,
                  stats: dict | None = None, on_error: str = "raise",
                  time_limit: float | None = None) -> torch.Tensor:
    """(R, T + 1): V(prompt + first t completion tokens) for t = 0..T, estimated as the mean reward of K
    continuations sampled from that prefix (t at or beyond a row's length: its final reward, exactly).

    ``batch``: a sampled ``Batch`` (``prompt_ids``, ``prompt_mask``, ``completion_ids``, ``mask``); ``task``:
    a task name or ``Task``, whose ``reward(text, answer).reward`` scores each continued completion (the
    outcome reward, without the Rewarder's shaping terms). R = len(rows) (default every row of ``batch``).
    Continuations are sampled with ``temperature`` and ``top_p`` (the Sampler's, to measure the policy that
    sampled) and end at EOS or when prefix plus continuation reach ``max_new_tokens`` completion tokens
    (default: the batch's width T; pass the Sampler's budget to match it exactly). Column 0 is V(prompt).
    Deterministic under ``generator`` (draws happen in a fixed order); ``stats``, if a dict, receives
    ``sequences`` (continuations sampled), ``sampled_tokens`` and ``forwards`` (model calls).
    Every score goes through the Rewarder's call path (``outcome_rewarder``): ``time_limit`` and ``on_error`` act
    as ``reward_time_limit`` and ``reward_on_error`` do in training (under "zero" a failed score counts 0).

    Cost: every row of length L needs its L prefixes (t = 0..L-1) continued K times, so K * sum(L)
    continuations. Prefixes of the same length t go through ``rlnb.models.generate.sample`` together: one batched
    prefill of the (left-padded) prefixes, then one forward per generated token with the KV cache, at most
    ``max_new_tokens - t`` of them; so at most sum_t (max_new_tokens - t) ~ T^2 / 2 forward passes in all
    (more when a chunk exceeds MAX_SEQUENCES), over about K * sum(L) * (mean continuation length) sampled
    tokens: K * L / 2 times the tokens of the completions themselves.
    """
    task = _tasks.get(task) if isinstance(task, str) else task
    _check(batch, task, K, max_new_tokens)
    scorer = outcome_rewarder(task, on_error=on_error, time_limit=time_limit)
    rows = _rows(batch, rows)
    T = batch.completion_ids.shape[1]
    M = T if max_new_tokens is None else max_new_tokens
    if M < T:
        raise ValueError(f"max_new_tokens: expected at least the batch's completion width {T}, got {M}")
    comp, lengths = batch.completion_ids[rows], batch.lengths[rows]     # (R, T), (R,)
    answers = [batch.answers[r] for r in rows.tolist()]
    prompts = [batch.prompt_ids[r][batch.prompt_mask[r].bool()] for r in rows.tolist()]  # real prompt tokens
    texts = tokenizer.batch_decode([comp[i, : lengths[i]].tolist() for i in range(len(rows))], skip_special_tokens=True)
    final = scorer.score(texts, answers)["total"]                        # (R,)
    values = final[:, None].repeat(1, T + 1)                            # (R, T + 1): t >= L keeps the outcome
    count = {"sequences": 0, "sampled_tokens": 0, "forwards": 0}
    was_training = model.training
    model.eval()  # no dropout while sampling
    try:
        for t in range(T):
            live = torch.nonzero(lengths > t).flatten().tolist()        # rows with a token at position t
            step = max(1, MAX_SEQUENCES // K)
            for start in range(0, len(live), step):
                chunk = live[start : start + step]
                heads = [torch.cat([prompts[i], comp[i, :t]]) for i in chunk]
                values[chunk, t] = _continue(model, tokenizer, scorer, heads, [comp[i, :t] for i in chunk],
                                             [answers[i] for i in chunk], K=K, budget=M - t, temperature=temperature,
                                             top_p=top_p, generator=generator, count=count)
    finally:
        model.train(was_training)
    if stats is not None:
        stats.update(count)
    return values


def mc_token_advantages(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(R, T): A_t = V(s_t) - V(s_{t-1}) = values[:, t + 1] - values[:, t], zero where ``mask`` is 0.

    The sum over a completion telescopes: sum_t A_t = V(s_L) - V(s_0) = its reward - V(prompt), exactly.
    """
    if not isinstance(values, torch.Tensor) or values.dim() != 2:
        raise ValueError(f"values: expected an (R, T + 1) tensor of prefix values, got {_shape(values)}")
    if not isinstance(mask, torch.Tensor) or mask.shape != (values.shape[0], values.shape[1] - 1):
        raise ValueError(f"mask: expected shape {(values.shape[0], values.shape[1] - 1)} (R, T) to match values "
                         f"{tuple(values.shape)}, got {_shape(mask)}")
    return (values[:, 1:] - values[:, :-1]) * mask.to(values.dtype)    # (R, T)


def continuation_values(model, tokenizer, task, prompt_ids: torch.Tensor, prefixes, answer, *, K: int = 8,
                        max_new_tokens: int = 32, temperature: float = 1.0, top_p: float = 1.0,
                        generator: torch.Generator | None = None) -> torch.Tensor:
    """(n,) V(prompt + prefix) for each of n ``prefixes`` (1-D tensors of completion token ids): the mean outcome
    reward of K continuations sampled from it, each ending at EOS or at ``max_new_tokens`` completion tokens in all.
    ``prompt_ids`` (Tp,) the prompt's real tokens (no padding); ``answer`` what ``task.reward`` checks against.
    ``prefix_values`` measures every prefix of whole completions; this measures only the ones you name.
    """
    task = _tasks.get(task) if isinstance(task, str) else task
    if isinstance(K, bool) or not isinstance(K, int) or K < 1:
        raise ValueError(f"K: expected a positive int (continuations per prefix), got {K!r}")
    prefixes = [torch.as_tensor(p, dtype=torch.long).flatten() for p in prefixes]
    if not prefixes or max(len(p) for p in prefixes) >= max_new_tokens:
        raise ValueError(f"prefixes: expected a non-empty list, each shorter than max_new_tokens={max_new_tokens}")
    prompt_ids = torch.as_tensor(prompt_ids, dtype=torch.long).flatten()
    scorer, count, out = outcome_rewarder(task), {"sequences": 0, "sampled_tokens": 0, "forwards": 0}, []
    was_training = model.training
    model.eval()
    try:
        for p in prefixes:  # one prefix at a time: each has its own token budget
            out.append(_continue(model, tokenizer, scorer, [torch.cat([prompt_ids, p])], [p], [answer], K=K,
                                 budget=max_new_tokens - len(p), temperature=temperature, top_p=top_p,
                                 generator=generator, count=count))
    finally:
        model.train(was_training)
    return torch.cat(out)                                                  # (n,)


def branch_credit(ids: torch.Tensor, rewards: torch.Tensor, prefix, *, weights: torch.Tensor | None = None,
                  baselines: torch.Tensor | None = None) -> dict:
    """Uniform and Monte-Carlo credit of each next token after one prefix s, from whole completions of one prompt.

    ``ids`` (N, T) completions, ``rewards`` (N,), ``prefix`` (t,) token ids: the rows that start with it are at
    state s. ``weights`` (N,): each completion's probability when ``ids`` enumerates them all (exact), or None for
    samples (equal weights). ``baselines`` (N,): what each row's uniform advantage subtracts (default V(s0), the
    prompt's value: the weighted mean reward). Returns ``{"V(s0)", "V(s)", "tokens": {x: {"share", "V(s,x)",
    "uniform", "mc"}}}``: ``uniform`` the mean of r - b over the rows that chose x at s, ``mc`` = V(s,x) - V(s).
    With b = V(s0), uniform - mc = V(s) - V(s0) for every x: uniform credit is Monte Carlo's plus a term
    that does not depend on the token, which is why its gradient is unbiased (not because the two are equal).

    >>> ids = torch.tensor([[5, 0], [6, 7], [6, 8]]); r = torch.tensor([1.0, 1.0, 0.0])
    >>> out = branch_credit(ids, r, [6], weights=torch.tensor([0.5, 0.25, 0.25]))
    >>> out["V(s0)"], out["V(s)"], out["tokens"][7]["uniform"], out["tokens"][7]["mc"], out["tokens"][8]["mc"]
    (0.75, 0.5, 0.25, 0.5, -0.5)
    """
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2:
        raise ValueError(f"ids: expected an (N, T) tensor of completion token ids, got {_shape(ids)}")
    N, T = ids.shape
    rewards = torch.as_tensor(rewards, dtype=torch.float64)
    w = torch.ones(N, dtype=torch.float64) if weights is None else torch.as_tensor(weights, dtype=torch.float64)
    for name, x in (("rewards", rewards), ("weights", w)):
        if x.shape != (N,):
            raise ValueError(f"{name}: expected shape ({N},) to match ids {tuple(ids.shape)}, got {tuple(x.shape)}")
    prefix = torch.as_tensor(prefix, dtype=torch.long).flatten()
    t = len(prefix)
    if t >= T:
        raise ValueError(f"prefix: expected fewer than {T} tokens (the completions' width), got {t}")
    v0 = float((w * rewards).sum() / w.sum())
    b = torch.full((N,), v0, dtype=torch.float64) if baselines is None else torch.as_tensor(baselines, dtype=torch.float64)
    if b.shape != (N,):
        raise ValueError(f"baselines: expected shape ({N},), got {tuple(b.shape)}")
    at_s = (ids[:, :t] == prefix).all(1)                                  # (N,) rows at state s
    if not at_s.any():
        raise ValueError(f"prefix: no completion starts with {prefix.tolist()}")
    mean = lambda m, x: float((w[m] * x[m]).sum() / w[m].sum())  # noqa: E731
    vs, tokens = mean(at_s, rewards), {}
    for x in ids[at_s, t].unique().tolist():
        took = at_s & (ids[:, t] == x)                                      # (N,) rows that chose x at s
        vsx = mean(took, rewards)
        tokens[x] = {"share": float(w[took].sum() / w[at_s].sum()), "V(s,x)": vsx,
                     "uniform": mean(took, rewards - b), "mc": vsx - vs}
    return {"V(s0)": v0, "V(s)": vs, "tokens": tokens}


def outcome_rewarder(task, *, on_error: str = "raise", time_limit: float | None = None) -> Rewarder:
    """A Rewarder of one function, ``outcome``: ``task.reward(text, answer).reward`` per text (the task's own
    format weight, no shaping), so prefix values share the training Rewarder's time limit and error policy."""

    def outcome(completions, answer, **kw):
        return [task.reward(c, a).reward for c, a in zip(completions, answer)]

    return Rewarder({"outcome": outcome}, on_error=on_error, time_limit=time_limit)


def _continue(model, tokenizer, scorer: Rewarder, heads, done_tokens, answers, *, K, budget, temperature, top_p,
              generator, count) -> torch.Tensor:
    """(n,) mean reward of K continuations of each prefix in ``heads`` (prompt + completion so far)."""
    dev = next(model.parameters()).device
    width = max(len(h) for h in heads)
    ids = torch.full((len(heads), width), tokenizer.pad_token_id, dtype=torch.long)  # (n, Tp + t) left-padded
    attn = torch.zeros_like(ids)
    for j, h in enumerate(heads):
        ids[j, width - len(h):], attn[j, width - len(h):] = h, 1
    ids, attn = ids.repeat_interleave(K, 0).to(dev), attn.repeat_interleave(K, 0).to(dev)  # (n K, Tp + t)
    cont, live, _ = sample(model, ids, attn, max_new_tokens=budget, temperature=temperature, top_p=top_p,
                           eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                           generator=generator)
    cont, live = cont.cpu(), live.cpu().bool()                          # (n K, T'), (n K, T')
    full = [done_tokens[j // K].tolist() + cont[j][live[j]].tolist() for j in range(len(cont))]
    texts = tokenizer.batch_decode(full, skip_special_tokens=True)
    rewards = scorer.score(texts, [answers[j // K] for j in range(len(texts))])["total"]  # (n K,)
    count["sequences"] += len(cont)
    count["sampled_tokens"] += int(live.sum())
    count["forwards"] += cont.shape[1]  # one prefill plus one per generated token but the last
    return rewards.view(len(heads), K).mean(-1)


def _rows(batch: Batch, rows) -> torch.Tensor:
    if rows is None:
        return torch.arange(batch.B)
    idx = torch.as_tensor(rows)
    if idx.dim() != 1 or idx.dtype in (torch.float32, torch.float64, torch.bool) or len(idx) == 0:
        raise ValueError(f"rows: expected a non-empty list of row indices, got {rows!r}")
    if int(idx.min()) < 0 or int(idx.max()) >= batch.B:
        raise ValueError(f"rows: expected indices in 0..{batch.B - 1} (the batch's rows), got {idx.tolist()[:10]}")
    return idx.long()


def _check(batch, task, K, max_new_tokens) -> None:
    if not isinstance(batch, Batch) or batch.completion_ids is None or batch.prompt_ids is None:
        raise ValueError("batch: expected a sampled Batch (run the Sampler first: it writes prompt_ids, "
                         "completion_ids and mask)")
    if not callable(getattr(task, "reward", None)):
        raise TypeError(f"task: expected a task name or a Task with reward(text, answer), got {task!r}")
    if isinstance(K, bool) or not isinstance(K, int) or K < 1:
        raise ValueError(f"K: expected a positive int (continuations per prefix), got {K!r}")
    if max_new_tokens is not None and (isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int)):
        raise ValueError(f"max_new_tokens: expected an int or None, got {max_new_tokens!r}")


def _shape(x) -> str:
    return f"shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__


class PrefixValuer:
    """``extras["prefix_values"]`` (B, T + 1) = ``prefix_values`` of the batch, K continuations
    per prefix, sampled like the Sampler samples (same temperature, top_p and token budget).

    Reads: what the Sampler writes. Writes: ``extras["prefix_values"]``. Runs between the Rewarder and the
    Advantager when the advantage estimator lists ``prefix_values`` in its ``extra_inputs``.
    ``sampled_tokens``: the continuation tokens sampled so far (the price of the credit, for budgets).
    """

    def __init__(self, model, tokenizer, task, *, K: int = 4, temperature: float = 1.0, top_p: float = 1.0,
                 max_new_tokens: int = 32, generator: torch.Generator | None = None, on_error: str = "raise",
                 time_limit: float | None = None):
        if isinstance(K, bool) or not isinstance(K, int) or K < 1:
            raise ValueError(f"K: expected a positive int (mc_rollouts), got {K!r}")
        self.model, self.tokenizer, self.task, self.K = model, tokenizer, task, K
        self.temperature, self.top_p, self.max_new_tokens = temperature, top_p, max_new_tokens
        self.generator, self.on_error, self.time_limit = generator, on_error, time_limit
        self.sampled_tokens = 0

    def step(self, batch: Batch) -> Batch:
        stats: dict = {}
        values = prefix_values(self.model, self.tokenizer, batch, self.task, K=self.K, temperature=self.temperature,
                               top_p=self.top_p, max_new_tokens=max(self.max_new_tokens, batch.completion_ids.shape[1]),
                               generator=self.generator, stats=stats, on_error=self.on_error,
                               time_limit=self.time_limit)
        self.sampled_tokens += stats["sampled_tokens"]
        return batch.replace(extras={**batch.extras, "prefix_values": values})
