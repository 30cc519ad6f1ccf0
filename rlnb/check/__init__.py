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
from rlnb.check.base import Verdict, _compare, _same, _with_hints  # noqa: F401  (shared by every checker)
from rlnb.models.generate import top_p_filter as _top_p_filter
from rlnb.run.evaluate import pass_at_k as _pass_at_k
from rlnb.studies.scaling import sigmoid_curve as _sigmoid_curve
from rlnb.tasks.gsm8k import final_number as _final_number


def _reward_cases(seed: int = 0) -> list[tuple]:
    g = torch.Generator().manual_seed(seed)
    cases = [(torch.tensor([1.0, 0.0, 0.0, 0.0]), 4), (torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0, 0.0]), 3),
             (torch.tensor([0.5, 0.5, 0.5, 0.5]), 2)]
    cases += [(torch.rand(12, generator=g), G) for G in (2, 3, 4)]
    return cases


def grpo_advantage(fn, *, strict: bool = True) -> Verdict:
    """``fn(rewards (B,), G) -> (B,)``: (r - group mean) / (group std (unbiased) + 1e-6)."""
    hints = [(lambda r, G: (r - r.mean()) / (r.std() + 1e-6), "use each group's mean and std (r.view(-1, G)), not the batch's"),
             (lambda r, G: algos.ADVANTAGES["grpo"](r, G, unbiased=False),
              "GRPO's std here is Bessel-corrected (unbiased=True, divide by G - 1)"),
             (lambda r, G: algos.ADVANTAGES["dr_grpo"](r, G), "you subtracted the group mean; now divide by the group's std")]
    return _with_hints("grpo_advantage", fn, algos.ADVANTAGES["grpo"], _reward_cases(), hints, strict)


def rloo_advantage(fn, *, strict: bool = True) -> Verdict:
    """``fn(rewards (B,), G) -> (B,)``: r_i minus the mean of the *other* G-1 rewards of its group."""
    hints = [(lambda r, G: algos.ADVANTAGES["dr_grpo"](r, G), "the baseline must leave r_i out: (sum - r_i) / (G - 1)"),
             (lambda r, G: (r.view(-1, G) - (r.view(-1, G).sum(1, keepdim=True) - r.view(-1, G)) / G).reshape(-1),
              "the other rewards are G - 1, so divide their sum by G - 1, not G")]
    return _with_hints("rloo_advantage", fn, algos.ADVANTAGES["rloo"], _reward_cases(), hints, strict)


def maxrl_advantage(fn, *, strict: bool = True) -> Verdict:
    """``fn(rewards (B,), G) -> (B,)``: (r - group mean) / (group mean + 1e-6) for rewards >= 0."""
    return _compare("maxrl_advantage", fn, algos.ADVANTAGES["maxrl"], _reward_cases(), strict=strict)


def _loss_cases() -> list[tuple]:
    ratio = torch.tensor([[0.5, 0.9, 1.0, 1.1, 1.5], [0.7, 1.25, 1.3, 2.0, 0.79]])
    return [(ratio, torch.tensor([1.0, 1.0])), (ratio, torch.tensor([-1.0, 2.0])), (ratio, torch.tensor([0.0, -0.5]))]


def ppo_clip_loss(fn, *, eps_low: float = 0.2, eps_high: float = 0.2, strict: bool = True) -> Verdict:
    """``fn(ratio (B, T), adv (B,)) -> (B, T)``: max(-A rho, -A clip(rho, 1 - eps_low, 1 + eps_high))."""
    def ref(ratio, adv):
        return algos.POLICY_LOSSES["ppo_clip"](ratio.log(), torch.zeros_like(ratio), adv, torch.ones_like(ratio),
                                               eps_low=eps_low, eps_high=eps_high).loss
    return _compare("ppo_clip_loss", fn, ref, _loss_cases(), strict=strict)


def k3(fn, *, strict: bool = True) -> Verdict:
    """``fn(logp, ref_logp) -> k3``: exp(ref_logp - logp) + (logp - ref_logp) - 1."""
    g = torch.Generator().manual_seed(0)
    cases = [(torch.tensor([0.0, -1.0]), torch.tensor([0.0, -2.0])), (-torch.rand(3, 5, generator=g), -torch.rand(3, 5, generator=g))]
    return _compare("k3", fn, algos.KL_ESTIMATORS["k3"], cases, strict=strict)


def _agg_cases() -> list[tuple]:
    loss = torch.tensor([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    return [(loss, mask), (loss * -1, mask)]


def token_mean(fn, *, strict: bool = True) -> Verdict:
    """``fn(loss (B, T), mask (B, T)) -> scalar``: sum of loss * mask over all tokens / number of tokens."""
    return _compare("token_mean", fn, algos.AGGREGATIONS["token-mean"], _agg_cases(), strict=strict)


def seq_mean_token_mean(fn, *, strict: bool = True) -> Verdict:
    """``fn(loss (B, T), mask (B, T)) -> scalar``: mean over sequences of each sequence's token mean."""
    return _compare("seq_mean_token_mean", fn, algos.AGGREGATIONS["seq-mean-token-mean"], _agg_cases(), strict=strict)


def overlong_penalty(fn, *, max_new_tokens: int = 16, overlong_buffer: int = 4, strict: bool = True) -> Verdict:
    """``fn(lengths (B,)) -> (B,)``: DAPO's soft overlong punishment for L_max = 16, L_cache = 4."""
    cases = [(torch.tensor([1, 12, 13, 14, 15, 16, 17]),), (torch.arange(20),)]
    def ref(n):
        return algos.overlong_penalty(n, max_new_tokens=max_new_tokens, overlong_buffer=overlong_buffer)
    hints = [(lambda n: -ref(n), "a penalty is negative: 0 down to -1"),
             (lambda n: -(n > max_new_tokens).float(), "that is the hard cut only; add the linear ramp over the last "
                                                        "L_cache tokens before L_max")]
    return _with_hints("overlong_penalty", fn, ref, cases, hints, strict)


def top_p_filter(fn, *, strict: bool = True) -> Verdict:
    """``fn(logits (B, V), top_p) -> logits`` with -inf outside the nucleus."""
    g = torch.Generator().manual_seed(0)
    cases = [(torch.log(torch.tensor([[0.5, 0.3, 0.2]])), 0.7), (torch.randn(4, 9, generator=g), 0.9),
             (torch.randn(2, 5, generator=g), 1.0)]
    return _compare("top_p_filter", fn, _top_p_filter, cases, strict=strict)


def pass_at_k(fn, *, strict: bool = True) -> Verdict:
    """``fn(n, c, k) -> float``: unbiased pass@k from n samples with c correct."""
    cases = [(4, 1, 1), (4, 1, 2), (8, 0, 3), (8, 8, 1), (10, 3, 5), (16, 2, 8)]
    hints = [(lambda n, c, k: c / n, "that is pass@1 whatever k is: use 1 - C(n - c, k) / C(n, k)"),
             (lambda n, c, k: 1 - (1 - c / n) ** k, "1 - (1 - c/n)^k samples with replacement and is biased; "
                                                    "count draws without replacement: 1 - C(n - c, k) / C(n, k)")]
    return _with_hints("pass_at_k", fn, _pass_at_k, cases, hints, strict)


def online_logsumexp(fn, *, strict: bool = True) -> Verdict:
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
    hints = [(lambda x, b: torch.stack([x[:, i:i + b].exp().sum(-1) for i in range(0, x.shape[1], b)]).sum(0).log(),
              "exp of a raw logit overflows near 89 in fp32 and 710 in fp64: subtract the running max first"),
             (lambda x, b: _online_lse(x, b, start=-float("inf")),
              "a first block of all -inf gives -inf - (-inf) = nan: start the running max at a finite -3e38"),
             (lambda x, b: _online_lse(x, b, rescale=False),
              "when a block raises the max from m to m', the sum so far must be rescaled by exp(m - m')")]
    return _with_hints("online_logsumexp", fn, lambda x, block: torch.logsumexp(x, -1), cases, hints, strict)


def _online_lse(x, block, *, start=-3.0e38, rescale=True):
    """The online logsumexp with one step optionally wrong (the hints' model of a mistake)."""
    m, s = torch.full(x.shape[:1], start, dtype=x.dtype), torch.zeros(x.shape[:1], dtype=x.dtype)
    for i in range(0, x.shape[1], block):
        z = x[:, i:i + block]
        m_new = torch.maximum(m, z.max(1).values)
        s = s * (torch.exp(m - m_new) if rescale else 1) + torch.exp(z - m_new[:, None]).sum(1)
        m = m_new
    return m + torch.log(s)


def final_number(fn, *, strict: bool = True) -> Verdict:
    """``fn(text) -> str | None``: GSM8K's answer: the last number after ``####`` (else in the whole text),
    commas removed, trailing decimal zeros dropped (``3.50`` -> ``3.5``, ``100.00`` -> ``100``); None if
    there is no number. Compared with ``rlnb.tasks.gsm8k.final_number``."""
    texts = ["Mia has 4 * 12 = 48 pencils, gives 9 away: 48 - 9 = 39.\n#### 39", "so 1,200 in total",
             "I do not know.", "", "It costs $1,234.50 in all.", "The answer is 7.", "x = 10. y = 20.5.",
             "It dropped to -3 degrees", "#### 100.00", "5 - 3 = 2, so #### 2", "He pays 0.50 each."]
    import re

    nums = lambda t: re.findall(r"-?[0-9][0-9,]*(?:\.[0-9]+)?", t.rsplit("####", 1)[-1])  # noqa: E731
    hints = [(lambda t: (_final_number(nums(t)[0]) if nums(t) else None),
              "take the last number (the answer comes at the end of the reasoning), not the first"),
             (lambda t: (nums(t)[-1].rstrip("0").rstrip(".") if "." in nums(t)[-1] else nums(t)[-1]) if nums(t) else None,
              "remove the thousands separators: '1,200' is the number 1200"),
             (lambda t: nums(t)[-1].replace(",", "") if nums(t) else None,
              "drop trailing decimal zeros ('3.50' -> '3.5', '100.00' -> '100'): the reference answer is written that way")]
    return _with_hints("final_number", fn, _final_number, [(t,) for t in texts], hints, strict)


def dynamic_sampling_keep(fn, *, strict: bool = True) -> Verdict:
    """``fn(correct (B,) bool, G) -> keep (B,) bool``: DAPO's dynamic-sampling predicate, True on every row
    of a group whose number of correct completions n satisfies 0 < n < G (groups contiguous)."""
    g = torch.Generator().manual_seed(0)
    cases = [(torch.tensor([1, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0]).bool(), 4),
             (torch.tensor([1, 0, 1, 1, 0, 0]).bool(), 2), (torch.rand(24, generator=g) < 0.5, 3),
             (torch.rand(32, generator=g) < 0.15, 8)]
    return _compare("dynamic_sampling_keep", fn, lambda correct, G: algos.FILTERS["dynamic_sampling"](
        torch.zeros(len(correct)), G, correct=correct), cases, strict=strict)


def scalerl_curve(fn, *, strict: bool = True) -> Verdict:
    """``fn(C, A, B, C_mid, R0) -> R``: ScaleRL's R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) on a (N,)
    tensor of compute values, with R(0) = R0."""
    C = torch.tensor([0.0, 10.0, 100.0, 1000.0, 1e4], dtype=torch.float64)
    cases = [(C, 0.8, 1.0, 100.0, 0.2), (C, 0.5, 2.0, 300.0, 0.05), (C, 0.3, 0.5, 50.0, 0.25)]
    return _compare("scalerl_curve", fn, lambda C, A, B, C_mid, R0: _sigmoid_curve(C, A=A, B=B, C_mid=C_mid, R0=R0),
                    cases, strict=strict)


# --- checkers with hints: a wrong answer that matches a known mistake gets told which one -----------------

def _hack_share(rewards, correct):
    return float(((rewards > 0) & ~correct).float().mean())


def hack_share(fn, *, strict: bool = True) -> Verdict:
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


def crash_step(fn, *, strict: bool = True) -> Verdict:
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


def _gae_one(rewards, values, gamma, lam):
    adv, _ = algos.gae(rewards[None], values[None], torch.ones(1, len(rewards)), gamma=gamma, lam=lam,
                       whiten_advantages=False)
    return adv[0]


def gae_by_hand(fn, *, strict: bool = True) -> Verdict:
    """``fn(rewards (T,), values (T,), gamma, lam) -> (T,)``: GAE advantages of one completion, no whitening;
    the state after the last token is terminal (V = 0) (notebook 04)."""
    r, v = torch.tensor([0.0, 0.0, 1.0]), torch.tensor([0.5, 0.25, 0.75])
    cases = [(r, v, 1.0, 1.0), (r, v, 1.0, 0.0), (r, v, 0.9, 0.5), (torch.tensor([0.2, -0.1, 0.0, 1.0]),
             torch.tensor([0.1, 0.4, 0.3, 0.9]), 0.95, 0.8)]

    def no_terminal(r, v, g, lam):  # bootstraps from the last value again instead of V = 0
        return _gae_one(r + g * torch.cat([torch.zeros(len(v) - 1), v[-1:]]), v, g, lam)

    def lam_ignored(r, v, g, lam):
        return _gae_one(r, v, g, 1.0)

    hints = [(lambda r, v, g, lam: _gae_one(r, v, g, lam) + v, "that is the return A_t + V_t; the advantage is the "
              "return minus V_t"),
             (no_terminal, "after the last token the episode is over: V = 0 there, nothing to bootstrap from"),
             (lam_ignored, "the recursion is A_t = delta_t + gamma * lambda * A_{t+1}: lambda multiplies too")]
    return _with_hints("gae_by_hand", fn, _gae_one, cases, hints, strict)


def _value_clip(values, old_values, returns, eps):
    return algos.value_loss(values, old_values, returns, torch.ones_like(values), cliprange_value=eps).loss


def value_clip(fn, *, strict: bool = True) -> Verdict:
    """``fn(values, old_values, returns, eps) -> per-token loss``: PPO's clipped value loss,
    1/2 max((V - R)^2, (V_clip - R)^2) with V_clip = old_V + clip(V - old_V, -eps, eps) (notebook 04)."""
    v, old = torch.tensor([1.0, 0.1, -1.0, 0.3, 0.0]), torch.zeros(5)
    ret = torch.tensor([1.0, 1.0, 0.0, -0.5, 0.4])
    cases = [(v, old, ret, 0.2), (v, old + 0.2, ret, 0.5), (v[None], old[None] - 0.3, ret[None], 0.1)]

    def clipped_min(v, o, R, e):
        return 0.5 * torch.minimum((v - R) ** 2, (o + (v - o).clamp(-e, e) - R) ** 2)

    def around_target(v, o, R, e):
        return 0.5 * torch.maximum((v - R) ** 2, (R + (v - R).clamp(-e, e) - R) ** 2)

    hints = [(clipped_min, "PPO keeps the larger (pessimistic) of the two squared errors: max, not min"),
             (around_target, "clip V's move around the rollout's old value old_V, not around the target R"),
             (lambda v, o, R, e: 2 * _value_clip(v, o, R, e), "the loss has a factor 1/2 in front")]
    return _with_hints("value_clip", fn, _value_clip, cases, hints, strict)
from rlnb.check.mechanics import clip_can_fire, clip_weight, k3_pull, per_token_weight  # noqa: E402,F401  (chapters 05, 06, 08, 13)


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


def mc_value(fn, *, strict: bool = True) -> Verdict:
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


def token_credit(fn, *, strict: bool = True) -> Verdict:
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
def _score(logits, v):
    return torch.nn.functional.one_hot(torch.as_tensor(v), logits.shape[-1]).to(logits.dtype) - logits.softmax(-1)


def score_function(fn, *, strict: bool = True) -> Verdict:
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
