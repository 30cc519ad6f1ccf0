"""Looking at PPO's critic: its values on a batch, how wrong they are, and what GAE makes of them.

The value head (``rlnb.algos.ValueHead``) predicts V(s_t), the expected final reward from the state
s_t = prompt + o_<t. Its targets in training are the GAE returns; the truth it should approach is the
policy's own expected reward from that prefix, which ``rlnb.stages.credit.prefix_values`` estimates by sampling K
continuations (Monte Carlo). Column t of those prefix values and column t of the critic's values describe
the same state, for t < the completion's length.
"""

from __future__ import annotations

import torch

from rlnb.algos import gae
from rlnb.batch import Batch


def current_values(trainer, batch: Batch) -> torch.Tensor:
    """(B, T) the trainer's value head on ``batch``'s completions now (no gradient); zero on padding.

    For the values the critic had when the batch was sampled, read ``batch.old_values``.
    """
    from rlnb.models.forward import completion_logprobs

    if getattr(trainer, "value_head", None) is None:
        raise ValueError("trainer: expected a trainer with a critic (recipe 'ppo' or critic=True), got one without "
                         "a value head")
    dev = trainer.device
    was_training = trainer.model.training
    trainer.model.eval()
    try:
        with torch.no_grad():
            out = completion_logprobs(trainer.model, batch.prompt_ids.to(dev), batch.prompt_mask.to(dev),
                                      batch.completion_ids.to(dev), batch.mask.to(dev), value_head=trainer.value_head,
                                      temperature=trainer.recipe.temperature)
    finally:
        trainer.model.train(was_training)
    return out.values.cpu()


def outcome_token_rewards(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, T): each completion's outcome reward on its last valid token, 0 elsewhere (how PPO's Advantager
    feeds an outcome reward to GAE).

    >>> outcome_token_rewards(torch.tensor([1.0, 0.5]), torch.tensor([[1, 1, 0], [1, 1, 1]]))
    tensor([[0.0000, 1.0000, 0.0000],
            [0.0000, 0.0000, 0.5000]])
    """
    if rewards.dim() != 1 or mask.dim() != 2 or len(rewards) != mask.shape[0]:
        raise ValueError(f"rewards, mask: expected (B,) and (B, T) with the same B, got {tuple(rewards.shape)} "
                         f"and {tuple(mask.shape)}")
    last = (mask.sum(-1).long() - 1).clamp(min=0)                       # (B,) index of each final token
    out = torch.zeros(mask.shape, dtype=torch.float32)
    out[torch.arange(len(rewards)), last] = rewards.float()
    return out


def masked_rmse(x: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> float:
    """sqrt(mean over valid tokens of (x - target)^2).

    >>> masked_rmse(torch.tensor([[1.0, 5.0]]), torch.tensor([[0.0, 0.0]]), torch.tensor([[1, 0]]))
    1.0
    """
    m = mask.to(torch.float64)
    if m.sum() == 0:
        raise ValueError("mask: expected at least one valid token, got none")
    return float((((x.double() - target.double()) ** 2) * m).sum().div(m.sum()).sqrt())


def masked_std(x: torch.Tensor, mask: torch.Tensor) -> float:
    """Standard deviation of ``x`` over the valid tokens (population form: it describes these tokens).

    >>> masked_std(torch.tensor([[1.0, 3.0, 100.0]]), torch.tensor([[1, 1, 0]]))
    1.0
    """
    m = mask.to(torch.float64)
    if m.sum() == 0:
        raise ValueError("mask: expected at least one valid token, got none")
    mean = (x.double() * m).sum() / m.sum()
    return float((((x.double() - mean) ** 2) * m).sum().div(m.sum()).sqrt())


def gae_tradeoff(token_rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, target: torch.Tensor, *,
                 gamma: float = 1.0, lams) -> dict[str, list[float]]:
    """GAE's bias/variance trade-off on one batch: for each lambda in ``lams``, the spread of the per-token
    advantages (``masked_std``) and their error against ``target`` advantages (``masked_rmse``; the
    Monte-Carlo per-token advantages of ``rlnb.stages.credit.mc_token_advantages``). No whitening, so the numbers
    stay in reward units. Shapes: token_rewards, values, mask, target (B, T).

    lambda = 1: A_t = R - V_t (the reward sample minus the critic: unbiased, as noisy as one sample);
    lambda = 0: A_t = V_{t+1} - V_t (the critic's own difference: quiet, as wrong as the critic).
    """
    lams = [float(x) for x in lams]
    spread, error = [], []
    for lam in lams:
        adv, _ = gae(token_rewards, values, mask, gamma=gamma, lam=lam, whiten_advantages=False)  # (B, T)
        spread.append(masked_std(adv, mask))
        error.append(masked_rmse(adv, target, mask))
    return {"lam": lams, "spread": spread, "error": error}
