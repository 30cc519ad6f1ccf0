"""Loss aggregation: how a ``(B, T)`` per-token loss becomes one scalar. GRPO, DAPO and Dr. GRPO
differ mostly here. Signature: ``fn(loss, mask, *, group_size, <hyper>) -> scalar``.

Rows dropped by a filter (zero-variance groups, overlong completions) arrive with an all-zero mask
row. Every denominator counts only what is kept: tokens with mask 1, rows with at least one valid
token, groups with at least one valid token. So dropping a row gives the same value as deleting it
from the batch. (A completion with no valid token at all is indistinguishable from a dropped one.)
If nothing is kept the result is 0 (not NaN), with zero gradient.

Each entry's per-token weight d(scalar)/d loss_{i,t} is what the widgets plot: 1/sum M for
token-mean, 1 for token-sum, 1/(n_rows |o_i|) for seq-mean-token-mean, 1/(n_rows L) for seq-mean-token-sum-norm.
"""

from __future__ import annotations

import torch

from rlnb.algos.registry import Registry
from rlnb.core.checks import check_same_device, check_tensor

AGGREGATIONS = Registry("loss aggregation")


def _check(loss: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    from rlnb.algos.inputs import check_mask

    check_tensor("loss", loss, floating=True, finite=True)
    check_tensor("mask", mask)
    check_same_device(loss=loss, mask=mask)
    check_mask(mask)
    if loss.dim() != 2 or mask.shape != loss.shape:
        raise ValueError(f"loss, mask: expected equal (B, T) shapes, got {tuple(loss.shape)} and {tuple(mask.shape)}")
    return mask.to(loss.dtype)


def _kept_rows(m: torch.Tensor) -> torch.Tensor:
    return (m.sum(-1) > 0).sum().clamp(min=1)                          # number of rows still in the loss


@AGGREGATIONS.register("token-mean")
def token_mean(loss: torch.Tensor, mask: torch.Tensor, *, group_size: int = 1) -> torch.Tensor:
    """sum_{i,t} l_{i,t} M_{i,t} / sum_{i,t} M_{i,t}: every token weighs the same (DAPO, arXiv 2503.14476).

    >>> token_mean(torch.tensor([[1., 1., 1.], [4., 0., 0.]]), torch.tensor([[1., 1., 1.], [1., 0., 0.]]))
    tensor(1.7500)
    """
    m = _check(loss, mask)
    return (loss * m).sum() / m.sum().clamp(min=1)


@AGGREGATIONS.register("token-sum")
def token_sum(loss: torch.Tensor, mask: torch.Tensor, *, group_size: int = 1) -> torch.Tensor:
    """sum_{i,t} l_{i,t} M_{i,t}: no normaliser at all, the plain sum of REINFORCE's per-action terms
    (Williams 1992); verl's ``token-sum``. Every token weighs 1, so the loss and the gradient grow with
    the batch size and the completion lengths: the learning rate must absorb the scale (verl multiplies
    by the data-parallel size so the averaged gradient is the global sum; one process here).

    >>> token_sum(torch.tensor([[1., 1., 1.], [4., 0., 0.]]), torch.tensor([[1., 1., 1.], [1., 0., 0.]]))
    tensor(7.)
    """
    m = _check(loss, mask)
    return (loss * m).sum()


@AGGREGATIONS.register("seq-mean-token-mean")
def seq_mean_token_mean(loss: torch.Tensor, mask: torch.Tensor, *, group_size: int = 1) -> torch.Tensor:
    """mean_i (sum_t l_{i,t} M_{i,t} / |o_i|): original GRPO (arXiv 2402.03300), GSPO. Each token of a
    sequence of length |o_i| weighs 1/|o_i|, so long sequences get less per-token push (length bias).
    The mean is over kept rows only.

    >>> seq_mean_token_mean(torch.tensor([[1., 1., 1.], [4., 0., 0.]]), torch.tensor([[1., 1., 1.], [1., 0., 0.]]))
    tensor(2.5000)
    """
    m = _check(loss, mask)
    per_seq = (loss * m).sum(-1) / m.sum(-1).clamp(min=1)              # (B,)
    return per_seq.sum() / _kept_rows(m)


@AGGREGATIONS.register("seq-mean-token-sum")
def seq_mean_token_sum(loss: torch.Tensor, mask: torch.Tensor, *, group_size: int = 1) -> torch.Tensor:
    """mean_i sum_t l_{i,t} M_{i,t}: every token weighs 1/n_rows, so the scale grows with length
    (verl's ``seq-mean-token-sum``; Dr. GRPO, arXiv 2503.20783, without its constant L). The mean is over
    kept rows only.

    >>> seq_mean_token_sum(torch.tensor([[1., 1., 1.], [4., 0., 0.]]), torch.tensor([[1., 1., 1.], [1., 0., 0.]]))
    tensor(3.5000)
    """
    m = _check(loss, mask)
    return (loss * m).sum() / _kept_rows(m)


@AGGREGATIONS.register("seq-mean-token-sum-norm")
def seq_mean_token_sum_norm(loss: torch.Tensor, mask: torch.Tensor, *, group_size: int = 1,
                            max_new_tokens: int) -> torch.Tensor:
    """mean_i (sum_t l_{i,t} M_{i,t}) / L with L = ``max_new_tokens``, a true constant (Dr. GRPO,
    arXiv 2503.20783). Every token weighs 1/(n_rows L) whatever its sequence's length, so there is no
    length bias, and the value does not depend on how wide the batch happens to be padded. One library
    divides by the padded width T instead, which changes with the batch: we do not. The mean is over
    kept rows only. Raises ValueError if T > max_new_tokens (then L is not the longest completion).

    >>> seq_mean_token_sum_norm(torch.tensor([[1., 1., 1.], [4., 0., 0.]]), torch.tensor([[1., 1., 1.], [1., 0., 0.]]),
    ...                         max_new_tokens=7)
    tensor(0.5000)
    """
    m = _check(loss, mask)
    if not isinstance(max_new_tokens, int) or max_new_tokens < loss.shape[-1]:
        raise ValueError(f"max_new_tokens: expected an int >= the completion width T={loss.shape[-1]}, "
                         f"got {max_new_tokens!r}")
    return (loss * m).sum() / (_kept_rows(m) * max_new_tokens)


@AGGREGATIONS.register("prompt-mean")
def prompt_mean(loss: torch.Tensor, mask: torch.Tensor, *, group_size: int) -> torch.Tensor:
    """mean over prompts of (sum of the group's token losses / the group's token count) (ScaleRL,
    arXiv 2510.13786). Within a prompt's group every token weighs the same; every prompt weighs the
    same. Rows of a group are contiguous. The mean is over groups with at least one kept token.

    >>> prompt_mean(torch.tensor([[1., 1.], [4., 0.], [2., 2.], [2., 2.]]),
    ...             torch.tensor([[1., 1.], [1., 0.], [1., 1.], [1., 1.]]), group_size=2)
    tensor(2.)
    """
    m = _check(loss, mask)
    if not isinstance(group_size, int) or group_size < 1 or loss.shape[0] % group_size:
        raise ValueError(f"group_size: expected a positive int dividing B={loss.shape[0]}, got {group_size!r}")
    tok_sum = (loss * m).sum(-1).view(-1, group_size).sum(-1)          # (P,)
    tok_cnt = m.sum(-1).view(-1, group_size).sum(-1)                   # (P,)
    kept = (tok_cnt > 0).sum().clamp(min=1)
    return (tok_sum / tok_cnt.clamp(min=1)).sum() / kept
