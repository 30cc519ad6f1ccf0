"""Exercise checkers on values and credit per token: GAE and value clipping (04), Monte-Carlo values and token
credit (09). Reached as ``rlnb.check.<name>``."""

from __future__ import annotations

import torch

from rlnb import algos
from rlnb.check.base import Verdict, with_hints


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
    return with_hints("gae_by_hand", fn, _gae_one, cases, hints, strict)


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
    return with_hints("value_clip", fn, _value_clip, cases, hints, strict)


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
    return with_hints("mc_value", fn, _mc_value, _value_cases(), hints, strict)


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
    return with_hints("token_credit", fn, _token_credit, cases, hints, strict)
