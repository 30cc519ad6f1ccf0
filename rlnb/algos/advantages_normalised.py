"""Two group estimators from verl 0.9.1's registry: GDPO (one normalisation per reward part) and GPG.

Signature as in ``rlnb.algos.advantages``: ``fn(rewards, group_size, <extra inputs>, *, <hyper>)`` on
``(B,)`` tensors with each prompt's G rows contiguous. GDPO reads the Rewarder's parts as extra inputs:
``reward_parts`` (the batch field, name -> (B,) unweighted scores) and ``reward_weights`` (the batch
extra the Rewarder writes, (B, K): the weight of each part in the total, in ``reward_parts``' order).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from rlnb.algos.advantages import ADVANTAGES, grpo
from rlnb.algos.inputs import groups as _groups
from rlnb.core.checks import check_same_device, check_tensor


def _parts_matrix(rewards: torch.Tensor, reward_parts, reward_weights) -> tuple[torch.Tensor, torch.Tensor]:
    """The parts as a (B, K) matrix and their weights as (B, K), checked against ``rewards`` (B,)."""
    if reward_parts is None:
        raise ValueError(f"reward_parts: the advantage estimator 'gdpo' needs the Rewarder's parts, a dict "
                         f"name -> ({rewards.numel()},) tensor (batch.reward_parts), got None")
    if not isinstance(reward_parts, Mapping) or not reward_parts:
        raise TypeError(f"reward_parts: expected a non-empty dict name -> (B,) tensor, got {reward_parts!r:.80}")
    cols = []
    for name, part in reward_parts.items():
        check_tensor(f"reward_parts[{name!r}]", part, finite=True)
        check_same_device(rewards=rewards, **{f"reward_parts[{name!r}]": part})
        if part.shape != rewards.shape:
            raise ValueError(f"reward_parts[{name!r}]: expected shape {tuple(rewards.shape)} like rewards, "
                             f"got {tuple(part.shape)}")
        cols.append(part.to(rewards.dtype))
    parts = torch.stack(cols, dim=1)                                  # (B, K)
    if reward_weights is None:                                        # verl's default: every weight 1
        return parts, torch.ones_like(parts)
    w = check_tensor("reward_weights", reward_weights, finite=True).to(parts.dtype)
    check_same_device(rewards=rewards, reward_weights=w)
    if w.shape not in ((parts.shape[1],), parts.shape):
        raise ValueError(f"reward_weights: expected ({parts.shape[1]},) or {tuple(parts.shape)} (one weight per "
                         f"part in reward_parts' order {list(reward_parts)}), got {tuple(w.shape)}")
    return parts, w.expand_as(parts)


def _whiten(x: torch.Tensor, mask) -> torch.Tensor:
    """(x - mean) / sqrt(var + 1e-8) over the batch, var with Bessel's correction (verl's masked_whiten).

    x (B,); with ``mask`` (B, T) each row counts once per valid token (x broadcast over its tokens, as
    verl whitens), else once."""
    if mask is None:
        n = torch.ones_like(x)                                         # (B,)
    else:
        check_tensor("mask", mask, dim=2, finite=True)
        check_same_device(rewards=x, mask=mask)
        if mask.shape[0] != x.shape[0]:
            raise ValueError(f"mask: expected ({x.shape[0]}, T) like rewards, got {tuple(mask.shape)}")
        n = mask.to(x.dtype).sum(-1)                                   # (B,) tokens per row
    mean = (n * x).sum() / n.sum().clamp(min=1)
    var = (n * (x - mean) ** 2).sum() / (n.sum() - 1).clamp(min=1)
    return (x - mean) * torch.rsqrt(var + 1e-8)


def _part_advantage(part: torch.Tensor, group_size: int, *, unbiased: bool, eps: float,
                    singleton_zero: bool) -> torch.Tensor:
    """One reward part's group-normalised advantage (B,) -> (B,): ``grpo``, except for singleton groups,
    where verl's GRPO takes mean 0 and std 1 (A = r / (1 + eps)) unless ``singleton_zero``."""
    if group_size == 1 and not singleton_zero:
        return part / (1 + eps)
    return grpo(part.contiguous(), group_size, unbiased=unbiased, eps=eps)


@ADVANTAGES.register("gdpo")
def gdpo(rewards: torch.Tensor, group_size: int, reward_parts=None, reward_weights=None, mask=None, *,
         unbiased: bool = True, eps: float = 1e-6, singleton_zero: bool = False) -> torch.Tensor:
    """GDPO (Group reward-Decoupled normalisation Policy Optimization, arXiv 2601.05242; verl 0.9.1's
    ``compute_gdpo_outcome_advantage``):

    A_k = grpo(r_k) for each reward part k, within each group;  A = whiten_batch(sum_k w_k A_k).

    GRPO on the summed reward lets a part with a large spread drown the others, and maps different
    mixes of parts to the same advantage. GDPO normalises each part on its own first, so a group that
    differs only in format gets w_fmt times the advantage of a group that differs in correctness.

    Shapes: rewards (B,), each reward_parts[k] (B,), reward_weights (K,) or (B, K), mask (B, T) -> (B,). ``rewards``
    is only checked (the parts carry the signal). ``unbiased``, ``eps`` are GRPO's knobs; a part that is
    constant within a group contributes 0 there. A singleton group (G = 1) follows verl 0.9.1: its GRPO uses
    mean 0 and std 1, so each part enters as r_k / (1 + eps) and the batch whitening does the rest (rewards
    [1, 0, 0, 0] with G = 1 give about [1.5, -.5, -.5, -.5]); ``singleton_zero=True`` gives 0 instead
    (rlnb's rule for group estimators: no group, no signal).
    The batch whitening follows verl: over the batch's valid tokens (``mask``, which the Trainer passes),
    so a completion counts once per token; without ``mask``, once per completion. Where verl differs:
    verl reads the parts named in ``gdpo_reward_keys`` with
    weights ``gdpo_reward_weights`` (default 1); here every part the Rewarder summed, with the Rewarder's
    weights (``format_weight`` for ``format``). verl falls back to the total reward when no parts are
    given; here a missing ``reward_parts`` raises.

    Parts correct [1, 0 | 1, 1] and format [1, 1 | 0, 1] with weights (1, 0.5), G = 2: grpo gives each
    mixed pair +-0.7071, so sum_k w_k A_k = [.7071, -.7071, -.3536, .3536]; its batch std is
    sqrt(1.25 / 3) = 0.6455, hence +-1.0954 for the correctness pair and +-0.5477 for the format pair.
    GRPO on the totals [1.5, .5 | 1, 1.5] gives both pairs the same +-0.7071.

    >>> parts = {"correct": torch.tensor([1., 0., 1., 1.]), "format": torch.tensor([1., 1., 0., 1.])}
    >>> gdpo(torch.tensor([1.5, .5, 1., 1.5]), 2, parts, torch.tensor([1., .5]))
    tensor([ 1.0954, -1.0954, -0.5477,  0.5477])
    """
    r = _groups(rewards, group_size).reshape(-1)                      # (B,) checked
    parts, w = _parts_matrix(r, reward_parts, reward_weights)          # (B, K), (B, K)
    per_part = torch.stack([_part_advantage(parts[:, k], group_size, unbiased=unbiased, eps=eps,
                                            singleton_zero=singleton_zero)
                            for k in range(parts.shape[1])], dim=1)    # (B, K)
    return _whiten((w * per_part).sum(dim=1), mask)                    # (B,)


gdpo.extra_inputs = ("reward_parts", "reward_weights", "mask")
# what rlnb.core.checks's probes pass for them: one constant part (its advantage is 0), default weights
gdpo.probe_inputs = lambda rewards: {"reward_parts": {"probe": torch.ones_like(rewards)}, "reward_weights": None,
                                     "mask": None}


@ADVANTAGES.register("gpg")
def gpg(rewards: torch.Tensor, group_size: int, *, gpg_alpha_nonzero: bool = True,
        singleton_zero: bool = False) -> torch.Tensor:
    """GPG (Group Policy Gradient, Chu et al., arXiv 2504.02546; verl 0.9.1's ``compute_gpg_outcome_advantage``):

    A_i = alpha (r_i - mean_G r) / F_norm,   F_norm = 1,
    alpha = B / count_nonzero(r)   (verl 0.9.1, the default)   or   B / (B - M)   (the paper).

    M counts the rows of groups whose rewards are all equal: they have A = 0 and no gradient, yet a
    token- or sequence-mean over the batch still divides by them, which shrinks the gradient as more
    groups saturate. The paper's alpha = B / (B - M) undoes that shrinkage (``gpg_alpha_nonzero=False``).
    verl counts the rows with a *nonzero reward* instead (with 0/1 rewards: the correct rows), which is
    what runs by default. No std (F_norm = 1, the paper's best setting; verl fixes it). The paper pairs
    it with plain REINFORCE (verl's ``gpg`` loss is rlnb's ``pg``), no KL, no clip.

    Singleton groups (G = 1): verl takes the group mean as 0, so A = alpha r (the default);
    ``singleton_zero=True`` gives 0 (rlnb's rule for group estimators); the paper's M then counts the
    singletons with r = 0. With no row to count, alpha's denominator is clamped to 1.

    Groups [1, 0, 0, 0 | 1, 1, 1, 1 | 1, 0, 1, 0 | 0, 0, 0, 0]: B = 16, 7 nonzero rewards, alpha = 16/7 and
    row 0 gets 16/7 * 0.75 = 1.7143; the paper's M = 8, alpha = 2, row 0 gets 1.5.

    >>> r = torch.tensor([1., 0., 0., 0., 1., 1., 1., 1., 1., 0., 1., 0., 0., 0., 0., 0.])
    >>> gpg(r, 4)[[0, 1, 8]], gpg(r, 4, gpg_alpha_nonzero=False)[[0, 1, 8]]
    (tensor([ 1.7143, -0.5714,  1.1429]), tensor([ 1.5000, -0.5000,  1.0000]))
    >>> gpg(torch.tensor([1., 0., 3.]), 1)  # G = 1: alpha = 3 / 2, A = alpha r
    tensor([1.5000, 0.0000, 4.5000])
    """
    g = _groups(rewards, group_size)                                   # (P, G)
    if group_size == 1 and singleton_zero:
        return torch.zeros_like(g).reshape(-1)
    mean = g.mean(dim=1, keepdim=True) if group_size > 1 else torch.zeros_like(g)  # (P, 1) verl: 0 for G = 1
    if gpg_alpha_nonzero:
        n = torch.count_nonzero(g)
    else:
        # (P,) groups with a gradient; a singleton (mean 0) has one when its reward is nonzero
        spread = g.amax(dim=1) != g.amin(dim=1) if group_size > 1 else g[:, 0] != 0
        n = spread.sum() * group_size                                  # B - M
    alpha = g.numel() / n.clamp(min=1)
    return (alpha * (g - mean)).reshape(-1)
