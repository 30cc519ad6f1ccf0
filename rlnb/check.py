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
    hints = [(lambda r, G: (r - r.mean()) / (r.std() + 1e-6), "use each group's mean and std (r.view(-1, G)), not the batch's"),
             (lambda r, G: algos.ADVANTAGES["grpo"](r, G, unbiased=False),
              "GRPO's std here is Bessel-corrected (unbiased=True, divide by G - 1)"),
             (lambda r, G: algos.ADVANTAGES["dr_grpo"](r, G), "you subtracted the group mean; now divide by the group's std")]
    return _with_hints("grpo_advantage", fn, algos.ADVANTAGES["grpo"], _reward_cases(), hints, strict)


def rloo_advantage(fn, *, strict: bool = True) -> bool:
    """``fn(rewards (B,), G) -> (B,)``: r_i minus the mean of the *other* G-1 rewards of its group."""
    hints = [(lambda r, G: algos.ADVANTAGES["dr_grpo"](r, G), "the baseline must leave r_i out: (sum - r_i) / (G - 1)"),
             (lambda r, G: (r.view(-1, G) - (r.view(-1, G).sum(1, keepdim=True) - r.view(-1, G)) / G).reshape(-1),
              "the other rewards are G - 1, so divide their sum by G - 1, not G")]
    return _with_hints("rloo_advantage", fn, algos.ADVANTAGES["rloo"], _reward_cases(), hints, strict)


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
    def ref(n):
        return algos.overlong_penalty(n, max_new_tokens=max_new_tokens, overlong_buffer=overlong_buffer)
    hints = [(lambda n: -ref(n), "a penalty is negative: 0 down to -1"),
             (lambda n: -(n > max_new_tokens).float(), "that is the hard cut only; add the linear ramp over the last "
                                                        "L_cache tokens before L_max")]
    return _with_hints("overlong_penalty", fn, ref, cases, hints, strict)


def top_p_filter(fn, *, strict: bool = True) -> bool:
    """``fn(logits (B, V), top_p) -> logits`` with -inf outside the nucleus."""
    g = torch.Generator().manual_seed(0)
    cases = [(torch.log(torch.tensor([[0.5, 0.3, 0.2]])), 0.7), (torch.randn(4, 9, generator=g), 0.9),
             (torch.randn(2, 5, generator=g), 1.0)]
    return _compare("top_p_filter", fn, _top_p_filter, cases, strict=strict)


def pass_at_k(fn, *, strict: bool = True) -> bool:
    """``fn(n, c, k) -> float``: unbiased pass@k from n samples with c correct."""
    cases = [(4, 1, 1), (4, 1, 2), (8, 0, 3), (8, 8, 1), (10, 3, 5), (16, 2, 8)]
    hints = [(lambda n, c, k: c / n, "that is pass@1 whatever k is: use 1 - C(n - c, k) / C(n, k)"),
             (lambda n, c, k: 1 - (1 - c / n) ** k, "1 - (1 - c/n)^k samples with replacement and is biased; "
                                                    "count draws without replacement: 1 - C(n - c, k) / C(n, k)")]
    return _with_hints("pass_at_k", fn, _pass_at_k, cases, hints, strict)


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


def _score(logits, v):
    return torch.nn.functional.one_hot(torch.as_tensor(v), logits.shape[-1]).to(logits.dtype) - logits.softmax(-1)


def score_function(fn, *, strict: bool = True) -> bool:
    """``fn(logits (V,), v) -> (V,)``: the gradient of log softmax(logits)[v] with respect to the logits,
    one_hot(v) - softmax(logits) (notebook 03: the score function of the policy gradient)."""
    g = torch.Generator().manual_seed(0)
    cases = [(torch.tensor([0.0, 0.0, 0.0, 0.0], dtype=torch.float64), 1),
             (torch.tensor([2.0, -1.0, 0.5], dtype=torch.float64), 0), (torch.randn(6, generator=g, dtype=torch.float64), 5)]
    hints = [(lambda z, v: -_score(z, v), "the sign: log pi(v) rises with its own logit z_v"),
             (lambda z, v: torch.nn.functional.one_hot(torch.as_tensor(v), z.shape[-1]).to(z.dtype),
              "log pi(v) = z_v - logsumexp(z): the logsumexp term contributes -softmax(z)"),
             (lambda z, v: _score(z, v) * z.softmax(-1)[v], "that is the gradient of pi(v), not of log pi(v): "
                                                           "divide by pi(v)")]
    return _with_hints("score_function", fn, _score, cases, hints, strict)
