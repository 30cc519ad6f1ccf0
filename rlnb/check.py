"""Exercise checkers for the notebooks: ``rlnb.check.<name>(your_fn)``.

Each checker calls your function on a few hand-picked and random cases, compares it with the library's
own implementation, prints what it found, and returns True. On a mismatch it raises ``AssertionError``
with the first failing input, your output and the expected one, so the learner sees *where* it differs;
with ``strict=False`` (what the notebooks use) it prints the same message as "Not yet" and returns False,
so a half-done exercise never stops the rest of the notebook.
"""

from __future__ import annotations

import torch

from rlnb import algos
from rlnb.evaluate import pass_at_k as _pass_at_k
from rlnb.generate import top_p_filter as _top_p_filter
from rlnb.scaling import sigmoid_curve as _sigmoid_curve
from rlnb.tasks.gsm8k import final_number as _final_number


def _compare(name: str, fn, ref, cases: list[tuple], atol: float = 1e-5, strict: bool = True) -> bool:
    try:
        _run_cases(name, fn, ref, cases, atol)
    except AssertionError as e:
        if strict:
            raise
        print(f"Not yet. {e}")
        return False
    print(f"{name}: all {len(cases)} cases match the library. Well done!")
    return True


def _run_cases(name: str, fn, ref, cases: list[tuple], atol: float) -> None:
    for i, args in enumerate(cases):
        expected = ref(*args)
        try:
            got = fn(*args)
        except Exception as e:  # show the learner their own error, with the input that caused it
            raise AssertionError(f"{name}: your function raised {type(e).__name__}: {e} on case {i}: {args}") from e
        if not _same(got, expected, atol):
            raise AssertionError(f"{name}: case {i} differs.\n  input:    {args!r}\n  yours:    {got!r}\n  expected: {expected!r}")


def _same(got, expected, atol: float) -> bool:
    """Strings and None (answer extractors) must be equal; numbers and tensors close."""
    if expected is None or isinstance(expected, str):
        return type(got) is type(expected) and got == expected
    try:
        got_t, exp_t = torch.as_tensor(got, dtype=torch.float64), torch.as_tensor(expected, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        return False
    return got_t.shape == exp_t.shape and torch.allclose(got_t, exp_t, atol=atol, rtol=1e-4, equal_nan=True)


def _reward_cases(seed: int = 0) -> list[tuple]:
    g = torch.Generator().manual_seed(seed)
    cases = [(torch.tensor([1.0, 0.0, 0.0, 0.0]), 4), (torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0, 0.0]), 3),
             (torch.tensor([0.5, 0.5, 0.5, 0.5]), 2)]
    cases += [(torch.rand(12, generator=g), G) for G in (2, 3, 4)]
    return cases


def grpo_advantage(fn, *, strict: bool = True) -> bool:
    """``fn(rewards (B,), G) -> (B,)``: (r - group mean) / (group std (unbiased) + 1e-6)."""
    return _compare("grpo_advantage", fn, algos.ADVANTAGES["grpo"], _reward_cases(), strict=strict)


def rloo_advantage(fn, *, strict: bool = True) -> bool:
    """``fn(rewards (B,), G) -> (B,)``: r_i minus the mean of the *other* G-1 rewards of its group."""
    return _compare("rloo_advantage", fn, algos.ADVANTAGES["rloo"], _reward_cases(), strict=strict)


def maxrl_advantage(fn, *, strict: bool = True) -> bool:
    """``fn(rewards (B,), G) -> (B,)``: (r - group mean) / (group mean + 1e-6) for rewards >= 0."""
    return _compare("maxrl_advantage", fn, algos.ADVANTAGES["maxrl"], _reward_cases(), strict=strict)


def _loss_cases() -> list[tuple]:
    ratio = torch.tensor([[0.5, 0.9, 1.0, 1.1, 1.5], [0.7, 1.25, 1.3, 2.0, 0.79]])
    return [(ratio, torch.tensor([1.0, 1.0])), (ratio, torch.tensor([-1.0, 2.0])), (ratio, torch.tensor([0.0, -0.5]))]


def ppo_clip_loss(fn, *, eps_low: float = 0.2, eps_high: float = 0.2, strict: bool = True) -> bool:
    """``fn(ratio (B, T), adv (B,)) -> (B, T)``: max(-A rho, -A clip(rho, 1 - eps_low, 1 + eps_high))."""
    def ref(ratio, adv):
        return algos.POLICY_LOSSES["ppo_clip"](ratio.log(), torch.zeros_like(ratio), adv, torch.ones_like(ratio),
                                               eps_low=eps_low, eps_high=eps_high).loss
    return _compare("ppo_clip_loss", fn, ref, _loss_cases(), strict=strict)


def k3(fn, *, strict: bool = True) -> bool:
    """``fn(logp, ref_logp) -> k3``: exp(ref_logp - logp) + (logp - ref_logp) - 1."""
    g = torch.Generator().manual_seed(0)
    cases = [(torch.tensor([0.0, -1.0]), torch.tensor([0.0, -2.0])), (-torch.rand(3, 5, generator=g), -torch.rand(3, 5, generator=g))]
    return _compare("k3", fn, algos.KL_ESTIMATORS["k3"], cases, strict=strict)


def _agg_cases() -> list[tuple]:
    loss = torch.tensor([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    return [(loss, mask), (loss * -1, mask)]


def token_mean(fn, *, strict: bool = True) -> bool:
    """``fn(loss (B, T), mask (B, T)) -> scalar``: sum of loss * mask over all tokens / number of tokens."""
    return _compare("token_mean", fn, algos.AGGREGATIONS["token-mean"], _agg_cases(), strict=strict)


def seq_mean_token_mean(fn, *, strict: bool = True) -> bool:
    """``fn(loss (B, T), mask (B, T)) -> scalar``: mean over sequences of each sequence's token mean."""
    return _compare("seq_mean_token_mean", fn, algos.AGGREGATIONS["seq-mean-token-mean"], _agg_cases(), strict=strict)


def overlong_penalty(fn, *, max_new_tokens: int = 16, overlong_buffer: int = 4, strict: bool = True) -> bool:
    """``fn(lengths (B,)) -> (B,)``: DAPO's soft overlong punishment for L_max = 16, L_cache = 4."""
    cases = [(torch.tensor([1, 12, 13, 14, 15, 16, 17]),), (torch.arange(20),)]
    return _compare("overlong_penalty", fn, lambda n: algos.overlong_penalty(
        n, max_new_tokens=max_new_tokens, overlong_buffer=overlong_buffer), cases, strict=strict)


def top_p_filter(fn, *, strict: bool = True) -> bool:
    """``fn(logits (B, V), top_p) -> logits`` with -inf outside the nucleus."""
    g = torch.Generator().manual_seed(0)
    cases = [(torch.log(torch.tensor([[0.5, 0.3, 0.2]])), 0.7), (torch.randn(4, 9, generator=g), 0.9),
             (torch.randn(2, 5, generator=g), 1.0)]
    return _compare("top_p_filter", fn, _top_p_filter, cases, strict=strict)


def pass_at_k(fn, *, strict: bool = True) -> bool:
    """``fn(n, c, k) -> float``: unbiased pass@k from n samples with c correct."""
    cases = [(4, 1, 1), (4, 1, 2), (8, 0, 3), (8, 8, 1), (10, 3, 5), (16, 2, 8)]
    return _compare("pass_at_k", fn, _pass_at_k, cases, strict=strict)


def online_logsumexp(fn, *, strict: bool = True) -> bool:
    """``fn(x (N, V), block) -> (N,)``: log sum_j exp(x_j) per row, reading ``block`` columns at a time.

    Keep a running max m and a running sum s = sum exp(x - m); when a block raises the max to m', rescale
    s by exp(m - m') (the forward of ``rlnb/kernels/token_loss.py``). Cases include logits near 1000
    (exp overflows unless you subtract the max), a ragged last block, a block wider than V, and a row
    whose first block is all -inf (a masked vocabulary: -inf - (-inf) is nan, so start m finite).
    """
    g = torch.Generator().manual_seed(0)
    inf = float("inf")
    cases = [(torch.tensor([[1.0, 3.0, 2.0, 5.0, 0.0, 4.0]], dtype=torch.float64), 2),
             (torch.tensor([[1000.0, 1001.0, 999.0], [-1000.0, -1001.0, -999.0]], dtype=torch.float64), 2),
             (torch.randn(5, 37, generator=g, dtype=torch.float64) * 4, 8),
             (torch.randn(3, 10, generator=g, dtype=torch.float64), 64),
             (torch.tensor([[-inf, -inf, 0.0, 1.0, -inf], [2.0, -inf, -inf, -inf, 1.0]], dtype=torch.float64), 2)]
    return _compare("online_logsumexp", fn, lambda x, block: torch.logsumexp(x, -1), cases, strict=strict)


def final_number(fn, *, strict: bool = True) -> bool:
    """``fn(text) -> str | None``: GSM8K's answer: the last number after ``####`` (else in the whole text),
    commas removed, trailing decimal zeros dropped (``3.50`` -> ``3.5``, ``100.00`` -> ``100``); None if
    there is no number. Compared with ``rlnb.tasks.gsm8k.final_number``."""
    texts = ["Mia has 4 * 12 = 48 pencils, gives 9 away: 48 - 9 = 39.\n#### 39", "so 1,200 in total",
             "I do not know.", "", "It costs $1,234.50 in all.", "The answer is 7.", "x = 10. y = 20.5.",
             "It dropped to -3 degrees", "#### 100.00", "5 - 3 = 2, so #### 2", "He pays 0.50 each."]
    return _compare("final_number", fn, _final_number, [(t,) for t in texts], strict=strict)


def dynamic_sampling_keep(fn, *, strict: bool = True) -> bool:
    """``fn(correct (B,) bool, G) -> keep (B,) bool``: DAPO's dynamic-sampling predicate, True on every row
    of a group whose number of correct completions n satisfies 0 < n < G (groups contiguous)."""
    g = torch.Generator().manual_seed(0)
    cases = [(torch.tensor([1, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0]).bool(), 4),
             (torch.tensor([1, 0, 1, 1, 0, 0]).bool(), 2), (torch.rand(24, generator=g) < 0.5, 3),
             (torch.rand(32, generator=g) < 0.15, 8)]
    return _compare("dynamic_sampling_keep", fn, lambda correct, G: algos.FILTERS["dynamic_sampling"](
        torch.zeros(len(correct)), G, correct=correct), cases, strict=strict)


def scalerl_curve(fn, *, strict: bool = True) -> bool:
    """``fn(C, A, B, C_mid, R0) -> R``: ScaleRL's R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) on a (N,)
    tensor of compute values, with R(0) = R0."""
    C = torch.tensor([0.0, 10.0, 100.0, 1000.0, 1e4], dtype=torch.float64)
    cases = [(C, 0.8, 1.0, 100.0, 0.2), (C, 0.5, 2.0, 300.0, 0.05), (C, 0.3, 0.5, 50.0, 0.25)]
    return _compare("scalerl_curve", fn, lambda C, A, B, C_mid, R0: _sigmoid_curve(C, A=A, B=B, C_mid=C_mid, R0=R0),
                    cases, strict=strict)


# --- checkers with hints: a wrong answer that matches a known mistake gets told which one -----------------

def _with_hints(name: str, fn, ref, cases: list[tuple], hints: list[tuple], strict: bool) -> bool:
    """``_compare``, and on a mismatch: for each ``(mistake_fn, hint)`` that ``fn`` agrees with on every
    case, print the hint (the common mistakes of the exercise)."""
    try:
        _run_cases(name, fn, ref, cases, 1e-6)
    except AssertionError as e:
        for mistake, hint in hints:
            try:
                _run_cases(name, fn, mistake, cases, 1e-6)
            except AssertionError:
                continue
            print(f"Hint: {hint}")
        if strict:
            raise
        print(f"Not yet. {e}")
        return False
    print(f"{name}: all {len(cases)} cases match. Well done!")
    return True


def _hack_share(rewards, correct):
    return float(((rewards > 0) & ~correct).float().mean())


def hack_share(fn, *, strict: bool = True) -> bool:
    """``fn(rewards, correct) -> float``: the share of *all* completions that are paid (reward > 0) but
    not correct, from (B,) rewards and (B,) bool ``correct`` (notebook 07)."""
    cases = [(torch.tensor([1.0, 1.0, 0.0, 1.0]), torch.tensor([True, False, False, False])),
             (torch.tensor([0.0, 0.0, 1.0, 1.0, 1.0, 0.0]), torch.tensor([False, False, True, True, True, False])),
             (torch.tensor([0.0, 0.0]), torch.tensor([False, False]))]
    hints = [(lambda r, c: float(((r > 0) & ~c).float().sum() / (r > 0).float().sum().clamp(min=1)),
              "you divided by the paid completions; the share is over all completions (a mean over B)"),
             (lambda r, c: float((~c).float().mean()),
              "that is the share of wrong completions; a hack is wrong *and* paid (reward > 0)")]
    return _with_hints("hack_share", fn, _hack_share, cases, hints, strict)


def _crash_step(rewards, drop):
    best = float("-inf")
    for i, r in enumerate(rewards):
        best = max(best, r)
        if r < best - drop:
            return i
    return None


def crash_step(fn, *, strict: bool = True) -> bool:
    """``fn(rewards, drop) -> int | None``: the first step index whose reward is more than ``drop`` below
    the best reward so far (the running maximum), None if there is none (notebook 11)."""
    cases = [([0.2, 0.5, 0.6, 0.1, 0.0], 0.3), ([0.5, 0.4, 0.45, 0.1], 0.3), ([0.1, 0.2, 0.3], 0.1),
             ([0.9, 0.95, 0.7, 0.2], 0.5), ([0.6, 0.2, 0.9, 0.3], 0.5)]
    hints = [(lambda r, d: next((i for i, x in enumerate(r) if x < r[0] - d), None),
              "compare with the best reward so far (a running max), not with the first step's"),
             (lambda r, d: next((i - 1 for i, x in enumerate(r) if x < max(r[: i + 1]) - d), None),
              "return the step that crashed, not the one before it"),
             (lambda r, d: next((i for i, x in enumerate(r) if x < max(r) - d), None),
              "the maximum must be over the steps so far, not over the whole run (a later peak is not known yet)")]
    return _with_hints("crash_step", fn, _crash_step, cases, hints, strict)


def _mc_value(rewards, final, lengths):
    t = torch.arange(rewards.shape[1])
    return torch.where(t[None, :] >= lengths[:, None], final[:, None], rewards.float().mean(-1))


def _value_cases() -> list[tuple]:
    g = torch.Generator().manual_seed(9)
    cases = [(torch.tensor([[[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]]]),
              torch.tensor([0.0]), torch.tensor([2]))]
    cases += [((torch.rand(3, 6, K, generator=g) > 0.5).float(), torch.tensor([1.0, 0.0, 1.0]), torch.tensor([5, 2, 3]))
              for K in (2, 8)]
    return cases


def mc_value(fn, *, strict: bool = True) -> bool:
    """``fn(rewards, final, lengths) -> (R, T + 1)``: Monte-Carlo prefix values from ``rewards`` (R, T + 1, K),
    the rewards of K continuations sampled from each prefix s_t, ``final`` (R,) each completion's own reward
    and ``lengths`` (R,) its number of tokens: the mean over K for t < L, the final reward for t >= L
    (the completion is over; nothing is left to sample) (notebook 09)."""
    hints = [(lambda r, f, n: r.float().mean(-1),
              "for t >= L the completion has ended: its value is its own reward (final), not the continuations' mean"),
             (lambda r, f, n: torch.where(torch.arange(r.shape[1])[None, :] >= n[:, None], f[:, None],
                                          r.float().max(-1).values),
              "the max over K is pass@K of the prefix (any continuation right); the value is the mean"),
             (lambda r, f, n: torch.where(torch.arange(r.shape[1])[None, :] > n[:, None], f[:, None], r.float().mean(-1)),
              "off by one: s_L (all L tokens written) is already finished, so t = L takes the final reward too")]
    return _with_hints("mc_value", fn, _mc_value, _value_cases(), hints, strict)


def _token_credit(values, mask):
    return (values[:, 1:] - values[:, :-1]) * mask


def token_credit(fn, *, strict: bool = True) -> bool:
    """``fn(values, mask) -> (R, T)``: each token's Monte-Carlo advantage A_t = V(s_{t+1}) - V(s_t) from prefix
    ``values`` (R, T + 1), zero where ``mask`` (R, T) is 0; a completion's A_t sum to reward - V(prompt)
    (notebook 09)."""
    v = torch.tensor([[0.5, 0.25, 0.75, 1.0, 1.0], [0.5, 0.5, 0.0, 0.0, 0.0]])
    m = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    g = torch.Generator().manual_seed(3)
    w = torch.rand(4, 7, generator=g)
    cases = [(v, m), (w, (torch.arange(6)[None, :] < torch.tensor([[6], [1], [3], [5]])).float())]
    hints = [(lambda v, m: (v[:, :-1] - v[:, 1:]) * m,
              "sign: a token's credit is what it added, V after it minus V before it"),
             (lambda v, m: v[:, 1:] - v[:, :-1],
              "multiply by the mask: tokens after the end get no credit"),
             (lambda v, m: (v[:, 1:] - v[:, :1]) * m,
              "subtract the value just before the token (V(s_t)), not the prompt's value V(s_0)")]
    return _with_hints("token_credit", fn, _token_credit, cases, hints, strict)
