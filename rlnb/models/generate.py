"""Sampling G completions with the model's KV cache, one token at a time, in plain sight.

We write the loop ourselves instead of calling ``model.generate`` so that sampling draws from a
``torch.Generator`` we own (re-running a notebook cell gives the same completions) and so a learner can
read exactly what temperature and top-p do. At this model size it is as fast as ``generate``.
"""

from __future__ import annotations

import inspect

import torch

from rlnb.core.checks import check_model_inputs
from rlnb.models.threads import decode_threads, threads


def encode_prompts(tokenizer, prompts: list[str], device="cpu"):
    """Left-padded prompt ids and mask (B, Tp), each distinct prompt tokenized once (a group's G rows repeat it:
    128 rows took 1.9 ms, their 16 prompts 0.4)."""
    distinct = list(dict.fromkeys(prompts))
    enc = tokenizer(distinct, padding=True, return_tensors="pt")
    ids, mask = enc["input_ids"], enc["attention_mask"]
    if len(distinct) < len(prompts):
        index = {p: i for i, p in enumerate(distinct)}
        rows = torch.tensor([index[p] for p in prompts], dtype=torch.long)
        ids, mask = ids[rows], mask[rows]
    return ids.to(device), mask.to(device)


def top_p_filter(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Keep the smallest set of tokens whose probability reaches ``top_p``; the rest get -inf.

    >>> top_p_filter(torch.log(torch.tensor([[0.5, 0.3, 0.2]])), 0.7).isinf().tolist()
    [[False, False, True]]
    """
    if top_p >= 1.0:
        return logits
    sorted_logits, order = logits.sort(dim=-1, descending=True)         # (B, V)
    cum = sorted_logits.softmax(-1).cumsum(-1)
    drop_sorted = cum - sorted_logits.softmax(-1) >= top_p              # mass before this token already enough
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def next_token(logits: torch.Tensor, *, temperature: float, top_p: float, greedy: bool,
               generator: torch.Generator | None) -> torch.Tensor:
    """One token per row from ``logits`` (B, V): argmax if greedy, else a temperature/top-p sample."""
    if greedy:
        return logits.argmax(-1)
    probs = top_p_filter(logits.float() / temperature, top_p).softmax(-1)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def position_ids(mask: torch.Tensor) -> torch.Tensor:
    """Positions that skip left padding: a left-padded row still starts at position 0."""
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


def distinct_prompts(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The distinct rows of (ids, mask) as indices into the batch, and each row's distinct prompt: (U,), (B,).

    >>> distinct_prompts(torch.tensor([[5, 6], [0, 7], [5, 6]]), torch.tensor([[1, 1], [0, 1], [1, 1]]))
    (tensor([0, 1]), tensor([0, 1, 0]))
    """
    if prompt_ids.shape[0] == 0:
        empty = torch.zeros(0, dtype=torch.long, device=prompt_ids.device)
        return empty, empty
    key = torch.cat([prompt_ids * prompt_mask.long(), prompt_mask.long()], dim=1)  # (B, 2 Tp): padding ids ignored
    _, inv = torch.unique(key, dim=0, return_inverse=True)                         # (B,) sorted-unique order
    first = torch.full((int(inv.max()) + 1,), len(inv), dtype=torch.long, device=inv.device)
    first = first.scatter_reduce(0, inv, torch.arange(len(inv), device=inv.device), reduce="amin")
    rank = torch.argsort(first)                                                    # distinct prompts by first row
    new = torch.empty_like(rank).scatter_(0, rank, torch.arange(len(rank), device=rank.device))
    return first[rank], new[inv]


def cache_arg_name(model) -> str:
    """transformers >= 5.2x calls the KV cache ``cache``; older releases call it ``past_key_values``."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # a peft wrapper takes **kwargs
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def cache_of(out):
    return out.cache if hasattr(out, "cache") else out.past_key_values


def check_sample_args(model, prompt_ids, prompt_mask, *, temperature, max_new_tokens) -> None:
    """The arguments every sampling loop (this reference, ``rlnb.models.lean_decode``) refuses alike."""
    if not temperature > 0:
        raise ValueError(f"temperature: expected a number > 0, got {temperature!r}")
    if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens: expected a positive int, got {max_new_tokens!r}")
    check_model_inputs(model, prompt_ids=prompt_ids)
    if prompt_ids.dim() != 2 or prompt_mask.shape != prompt_ids.shape:
        raise ValueError(f"prompt_ids, prompt_mask: expected equal (B, Tp) shapes, got {tuple(prompt_ids.shape)} "
                         f"and {tuple(prompt_mask.shape)}")


@torch.no_grad()
def sample(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, *, max_new_tokens: int,
           eos_token_id: int, pad_token_id: int, temperature: float = 1.0, top_p: float = 1.0,
           greedy: bool = False, generator: torch.Generator | None = None, return_logp: bool = False):
    """Generate up to ``max_new_tokens`` per row of left-padded prompts.

    Returns ``completion_ids`` (B, T) right-padded with ``pad_token_id`` after EOS, ``mask`` (B, T)
    1.0 on generated tokens up to and including EOS, and ``truncated`` (B,) True where no EOS came;
    with ``return_logp`` also ``rollout_logp`` (B, T): log pi_T of each sampled token as this incremental
    pass computed it (before top-p; 0 on padding), the rollout policy's own log-probs.
    Logits with NaN or +inf (diverged weights) raise a ``ValueError`` naming the rows, after the loop.

    Cost: a prompt repeated in several rows (G completions each) is prefilled once and its KV cache copied
    to its rows; rows that reached EOS leave the batch (and the KV cache) once enough of them have, so a
    step costs what the rows still running need; the last token is never fed back (that forward's logits
    would go unused).
    """
    check_sample_args(model, prompt_ids, prompt_mask, temperature=temperature, max_new_tokens=max_new_tokens)
    with threads(decode_threads(model, prompt_ids.shape[0], prompt_ids.device)):  # one thread for small matmuls
        return _sample(model, prompt_ids, prompt_mask, max_new_tokens=max_new_tokens, eos_token_id=eos_token_id,
                       pad_token_id=pad_token_id, temperature=temperature, top_p=top_p, greedy=greedy,
                       generator=generator, return_logp=return_logp)


def _sample(model, prompt_ids, prompt_mask, *, max_new_tokens, eos_token_id, pad_token_id, temperature, top_p,
            greedy, generator, return_logp):
    B, dev = prompt_ids.shape[0], prompt_ids.device
    attn = prompt_mask.long()                                            # (b, Tp + t) for the rows still running
    pos = position_ids(attn)
    first, inv = distinct_prompts(prompt_ids, prompt_mask)              # (U,), (B,)
    share = 2 * len(first) <= B                                          # each distinct prompt prefilled once
    sel = first if share else slice(None)
    out = model(input_ids=prompt_ids[sel], attention_mask=attn[sel], position_ids=pos[sel], use_cache=True,
                logits_to_keep=1)  # prefill: only the last position's logits, never (B, Tp, V)
    past, logits = cache_of(out), out.logits[:, -1]                    # logits (U or B, V)
    if share:
        past, logits = _select_rows(past, inv), logits[inv]              # (B, ...): each row its prompt's cache
    cache_kw = cache_arg_name(model)
    last_pos = pos[:, -1:]                                               # (b, 1)
    rows = torch.arange(B, device=dev)                                   # (b,) running row -> batch row
    done = torch.zeros(B, dtype=torch.bool, device=dev)                  # (b,) rows past EOS, not yet dropped
    broken = torch.zeros(B, dtype=torch.bool, device=dev)                # (B,) rows whose logits went bad
    tokens = torch.full((B, max_new_tokens), pad_token_id, dtype=torch.long, device=dev)  # (B, T)
    live = torch.zeros(B, max_new_tokens, dtype=torch.bool, device=dev)
    logps = torch.zeros(B, max_new_tokens, dtype=torch.float32, device=dev) if return_logp else None
    T = max_new_tokens
    for t in range(max_new_tokens):
        bad = (logits.isnan() | logits.isposinf()).any(-1) | logits.isneginf().all(-1)  # (b,)
        broken[rows] |= bad & ~done
        logits = logits.masked_fill(bad[:, None], 0.0)                   # keep sampling; we raise below
        tok = next_token(logits, temperature=temperature, top_p=top_p, greedy=greedy, generator=generator)
        run = rows[~done]                                                # batch rows that took a token now
        tokens[run, t], live[run, t] = tok[~done], True
        if return_logp:
            lp = torch.log_softmax(logits.float() / temperature, dim=-1).gather(-1, tok[:, None]).squeeze(-1)
            logps[run, t] = lp[~done]
        done = done | (tok == eos_token_id)
        n_done = int(done.sum())                                         # one sync per token: cheap on a CPU
        if n_done == len(rows) or t == max_new_tokens - 1:
            T = t + 1
            break
        if n_done and (n_done * 8 >= len(rows) or len(rows) - n_done <= 8):  # drop finished rows in batches
            keep = torch.nonzero(~done).flatten()
            rows, tok, attn, last_pos, done = rows[keep], tok[keep], attn[keep], last_pos[keep], done[keep]
            past = _select_rows(past, keep)
        attn = torch.cat([attn, torch.ones_like(attn[:, :1])], dim=1)
        last_pos = last_pos + 1
        out = model(input_ids=tok[:, None], attention_mask=attn, position_ids=last_pos,
                    use_cache=True, **{cache_kw: past})
        past, logits = cache_of(out), out.logits[:, -1]
    if broken.any():
        rows = torch.nonzero(broken).flatten()[:10].tolist()
        raise ValueError(f"logits: NaN or inf in the model's logits for rows {rows} while sampling "
                         "(diverged weights? try a lower lr or max_grad_norm)")
    live = live[:, :T]
    truncated = ~(live & (tokens[:, :T] == eos_token_id)).any(-1)        # (B,) no EOS within the budget
    res = (tokens[:, :T], live.float(), truncated)
    return res + (logps[:, :T],) if return_logp else res


def _select_rows(past, keep: torch.Tensor):
    """The KV cache of the rows ``keep`` only (transformers' caches can drop batch rows in place)."""
    if hasattr(past, "batch_select_indices"):
        past.batch_select_indices(keep)
        return past
    return tuple(tuple(x[keep] for x in layer) for layer in past)       # legacy tuple-of-tuples cache
