"""The optimal token baseline (verl 0.9.1's ``optimal_token_baseline`` and ``tir_optimal_token_baseline``):
one baseline per prompt group and token position, weighted by how much gradient each path carries.

A group baseline b is optimal (lowest variance of the gradient estimate (G_t - b) grad log pi) when it
weights each sample's return by the squared norm of its score, b* = E[G ||grad log pi||^2] /
E[||grad log pi||^2] (Weaver and Tao 2001, arXiv 1301.2315). The token version takes the score with
respect to the logits, whose squared norm at token t is exact and cheap:

    w_t = ||onehot(o_t) - pi(.|o_<t)||^2 = 1 - 2 pi(o_t) + sum_v pi(v)^2,

accumulates it along the path, W_t = sum_{j <= t} w_j, and sets, per group and position t,

    B_t = sum_i G_{i,t} W_{i,t} / (sum_i W_{i,t} + eps),    A_{i,t} = G_{i,t} - B_t.

With an outcome reward G_{i,t} = r_i at every valid token. Confident paths (pi(o_t) near 1, w_t near 0)
barely move the baseline; uncertain ones dominate it.

Signature as in ``rlnb.algos.advantages``, but per token: ``fn(rewards, group_size, old_logp,
sum_pi_squared, mask, *, handle_zero_tail, eps) -> (B, T)``. ``old_logp`` and ``mask`` are the batch's;
``sum_pi_squared`` (B, T) is the Sampler's ``extras["sum_pi_squared"]`` (``sum_pi_squared`` below
computes it from logits), written when the estimator lists it in ``extra_inputs``.
"""

from __future__ import annotations

import torch

from rlnb.algos.advantages import ADVANTAGES
from rlnb.algos.inputs import as_float as _as_float
from rlnb.algos.inputs import check_mask
from rlnb.algos.inputs import groups as _groups
from rlnb.core.checks import check_same_device, check_tensor


def sum_pi_squared(logits: torch.Tensor, mask: torch.Tensor, *, temperature: float = 1.0) -> torch.Tensor:
    """sum_v pi(v)^2 at each position, pi = softmax(logits / temperature): (B, T, V) -> (B, T), 0 on padding.

    It is the collision probability of the next-token distribution: 1 for a one-hot pi, 1/V for a
    uniform one. Computed in fp32.

    >>> sum_pi_squared(torch.log(torch.tensor([[[0.5, 0.5], [0.9, 0.1]]])), torch.ones(1, 2))
    tensor([[0.5000, 0.8200]])
    """
    probs = torch.softmax(logits.float() / temperature, dim=-1)       # (B, T, V)
    return (probs ** 2).sum(-1) * mask.to(probs.dtype)                 # (B, T)


def _token_input(name: str, value, rewards: torch.Tensor, entry: str, like: torch.Tensor | None = None) -> torch.Tensor:
    """A required (B, T) extra input as a float tensor on the rewards' device, shaped like ``like``
    (old_logp) when given."""
    rows = rewards.shape[0]
    if value is None:
        raise ValueError(f"{name}: the advantage estimator {entry!r} needs a ({rows}, T) tensor (it is listed in "
                         f"its extra_inputs), got None")
    value = _as_float(check_tensor(name, value, dim=2, finite=True))
    check_same_device(rewards=rewards, **{name: value})
    want = (rows, "T") if like is None else tuple(like.shape)
    if value.shape[0] != rows or (like is not None and value.shape != like.shape):
        raise ValueError(f"{name}: expected shape {want} (one row per reward), got {tuple(value.shape)}")
    return value


def _compact(x: torch.Tensor, m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Shift each row's valid tokens to the left, in order: (B, T) -> (B, L_max), and the compact mask."""
    valid = m.bool()                                                   # (B, T)
    lengths = valid.sum(-1)                                            # (B,)
    width = int(lengths.max()) if lengths.numel() else 0
    rank = valid.long().cumsum(-1) - 1                                 # (B, T) index among valid tokens
    rows = torch.arange(x.shape[0], device=x.device)[:, None].expand_as(x)
    out = x.new_zeros(x.shape[0], width)
    out[rows[valid], rank[valid]] = x[valid]
    return out, (torch.arange(width, device=x.device) < lengths[:, None]).to(x.dtype)


def _expand(xc: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """Inverse of ``_compact``: put the compact values back at each row's valid positions."""
    valid = m.bool()
    rank = valid.long().cumsum(-1) - 1
    rows = torch.arange(m.shape[0], device=m.device)[:, None].expand_as(m)
    out = xc.new_zeros(m.shape)
    out[valid] = xc[rows[valid], rank[valid]]
    return out


def _group_baseline(ret: torch.Tensor, W: torch.Tensor, m: torch.Tensor, G: int, *, eps: float,
                    handle_zero_tail: bool, drop_empty: bool = False) -> torch.Tensor:
    """B_t per group and position, (B, T) -> (B, T); see the module docstring. ``drop_empty``: rows with no
    valid token leave their group (verl's multi-turn estimator), so a group left with one row has no baseline."""
    if G == 1:  # no other sample: no baseline, A = G_t (verl)
        return torch.zeros_like(ret)
    R, Wm, M = (x.view(-1, G, x.shape[-1]) for x in (ret, W * m, m))  # (P, G, T)
    b = ((R * Wm).sum(1) / (Wm.sum(1) + eps))[:, None, :].expand_as(R).clone()  # (P, G, T)
    if drop_empty:
        alone = (M.sum(-1) > 0).sum(1) == 1                            # (P,) one non-empty row left
        b = b.masked_fill(alone[:, None, None], 0.0)
    if handle_zero_tail:
        # Past the second-longest completion the longest is alone: its own return would be its baseline
        # and its advantage 0 there. verl gives that tail no baseline instead (A = G_t).
        L = M.sum(-1)                                                  # (P, G) lengths
        top2 = L.topk(2, dim=1).values                                 # (P, 2)
        longest = L == top2[:, :1]                                     # (P, G)
        alone = (longest.sum(1) == 1) & (top2[:, 0] > top2[:, 1])      # (P,) one strictly longest row
        tail = torch.arange(R.shape[-1], device=R.device) >= top2[:, 1, None, None]  # (P, 1, T)
        b = b.masked_fill(longest[..., None] & alone[:, None, None] & tail, 0.0)
    return b.reshape(ret.shape)


def _optimal_token_baseline(rewards, group_size, old_logp, sum_pi_sq, mask, is_weights=None, *, compact: bool,
                            entry: str, handle_zero_tail: bool, eps: float) -> torch.Tensor:
    r = _groups(rewards, group_size).reshape(-1)                       # (B,)
    lp = _token_input("old_logp", old_logp, r, entry)                 # (B, T)
    s2 = _token_input("sum_pi_squared", sum_pi_sq, r, entry, lp)
    m = _token_input("mask", mask, r, entry, lp)
    check_mask(m)
    w = (1 - 2 * lp.exp() + s2) * m                                    # (B, T) ||d log pi(o_t) / d logits||^2
    if is_weights is not None:  # truncated IS weights rho_bar: the MSE-optimal weight under IS is rho_bar^2 w_t
        w = w * _token_input("rollout_is_weights", is_weights, r, entry, lp) ** 2
    W = w.cumsum(-1)                                                   # (B, T) path variance up to t
    ret = r[:, None] * m                                               # (B, T) reward-to-go of an outcome reward
    if compact:
        (Wc, mc), (retc, _) = _compact(W, m), _compact(ret, m)
        b = _group_baseline(retc, Wc, mc, group_size, eps=eps, handle_zero_tail=handle_zero_tail, drop_empty=True)
        return _expand((retc - b) * mc, m)
    b = _group_baseline(ret, W, m, group_size, eps=eps, handle_zero_tail=handle_zero_tail)
    return torch.where(m > 0, ret - b, torch.zeros_like(ret))          # exact 0 (not -0) on padding


@ADVANTAGES.register("optimal_token_baseline")
def optimal_token_baseline(rewards: torch.Tensor, group_size: int, old_logp=None, sum_pi_squared=None, mask=None,
                           rollout_is_weights=None, *, handle_zero_tail: bool = True, eps: float = 1e-8) -> torch.Tensor:
    """Optimal token baseline (OTB; verl 0.9.1's ``compute_optimal_token_baseline_advantage``; the optimal
    baseline of Weaver and Tao 2001, arXiv 1301.2315, taken per token with the logit score norm):

    w_t = 1 - 2 pi_old(o_t) + sum_v pi_old(v)^2,  W_t = sum_{j<=t} w_j,  B_t = sum_i r_i W_{i,t} / (sum_i W_{i,t} + eps)
    over the rows of a group valid at position t;  A_{i,t} = r_i - B_t.

    Shapes: rewards (B,), old_logp, sum_pi_squared, mask (B, T) -> (B, T), 0 on padding. Positions are
    aligned by absolute index t (the completion's t-th token). ``handle_zero_tail`` (verl's default True):
    where one completion is strictly the longest of its group, its tokens past the second-longest get
    no baseline (A = r) instead of their own return (A = 0). ``eps`` is the shared knob, 1e-8 here as in
    verl. Conventions: a singleton group (G = 1) has no baseline, A = r (verl's rule; the group entries in
    ``advantages`` give 0). ``rollout_is_weights`` (B, T), verl's optional truncated rollout IS weights
    rho_bar, scale the path weights to rho_bar^2 w_t; the Advantager passes the recipe's rollout correction's
    ``is_weight`` when it has one, else None (rho = 1).

    Group of two, pi_old(o_t) = 1/2 and sum pi^2 = 1/2 at every token (w_t = 1/2); rewards 0 (2 tokens)
    and 1 (3 tokens): W = [.5, 1] and [.5, 1, 1.5], so B = .5 at t = 0, 1; at t = 2 the long row is alone
    and gets no baseline: A = [-.5, -.5, 0] and [.5, .5, 1] (without the tail rule its last A would be 0).

    >>> half = torch.full((2, 3), 0.5); mask = torch.tensor([[1., 1., 0.], [1., 1., 1.]])
    >>> optimal_token_baseline(torch.tensor([0., 1.]), 2, half.log() * mask, half * mask, mask)
    tensor([[-0.5000, -0.5000,  0.0000],
            [ 0.5000,  0.5000,  1.0000]])

    A confident path (pi_old = 0.9, sum pi^2 = 0.82: w = 0.02) next to an uncertain one (w = 0.5): the
    baseline 0.02 / 0.52 = 0.0385 follows the uncertain path's return 0, not the mean 0.5.

    >>> optimal_token_baseline(torch.tensor([1., 0.]), 2, torch.tensor([[0.9], [0.5]]).log(),
    ...                        torch.tensor([[0.82], [0.5]]), torch.ones(2, 1))
    tensor([[ 0.9615],
            [-0.0385]])
    """
    return _optimal_token_baseline(rewards, group_size, old_logp, sum_pi_squared, mask, rollout_is_weights, compact=False,
                                   entry="optimal_token_baseline", handle_zero_tail=handle_zero_tail, eps=eps)


@ADVANTAGES.register("tir_optimal_token_baseline")
def tir_optimal_token_baseline(rewards: torch.Tensor, group_size: int, old_logp=None, sum_pi_squared=None,
                               mask=None, rollout_is_weights=None, *, handle_zero_tail: bool = True, eps: float = 1e-8) -> torch.Tensor:
    """Optimal token baseline for tool-integrated (multi-turn) rollouts (verl 0.9.1's
    ``compute_multi_turn_optimal_token_baseline_advantage``; Weaver and Tao 2001, arXiv 1301.2315):
    ``optimal_token_baseline`` with positions aligned by each row's k-th *valid* token instead of its t-th
    token, so tool-output tokens (mask 0 inside the completion) do not shift the comparison.

    Shapes, knobs and conventions as ``optimal_token_baseline``; on right-padded masks (every completion
    rlnb's Sampler writes) the two are identical. One more rule, verl's: a row with no valid token leaves
    its group, so a group with one non-empty row is a singleton (no baseline, A = r) whatever
    ``handle_zero_tail`` says (lengths [0, 5, 0, 0], rewards [1, .5, 0, 1]: the long row gets A = 0.5, not
    about 0 as its own return would give). With a hole at t = 1 in the short row (a tool
    output), its two valid tokens line up with the long row's first two: the same advantages as the
    first example of ``optimal_token_baseline``, spread back to positions 0 and 2.

    >>> half = torch.full((2, 3), 0.5); mask = torch.tensor([[1., 0., 1.], [1., 1., 1.]])
    >>> tir_optimal_token_baseline(torch.tensor([0., 1.]), 2, half.log() * mask, half * mask, mask)
    tensor([[-0.5000,  0.0000, -0.5000],
            [ 0.5000,  0.5000,  1.0000]])
    """
    return _optimal_token_baseline(rewards, group_size, old_logp, sum_pi_squared, mask, rollout_is_weights, compact=True,
                                   entry="tir_optimal_token_baseline", handle_zero_tail=handle_zero_tail, eps=eps)


def _probe_inputs(rewards: torch.Tensor) -> dict:
    """What rlnb.core.checks's probes pass: two valid tokens per row, pi_old(o_t) = sum pi^2 = 1/2."""
    half = torch.full((rewards.shape[0], 2), 0.5)
    return {"old_logp": half.log(), "sum_pi_squared": half, "mask": torch.ones_like(half)}


for _fn in (optimal_token_baseline, tir_optimal_token_baseline):
    _fn.extra_inputs = ("old_logp", "sum_pi_squared", "mask", "rollout_is_weights")
    _fn.probe_inputs = _probe_inputs
