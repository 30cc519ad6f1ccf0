"""The numbers behind the explorers: zoo functions evaluated on grids and hand-made groups.

Pure functions of tensors and floats; every registry entry is called through its public signature
with its hyperparameters by keyword, so the whole zoo shows up without any name-based branching.
Curves are computed in float64 so that what a slider shows is what the formula says.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable

import torch

from rlnb.algos import POLICY_LOSSES, EntropyThermostat, extra_inputs

# --- policy losses ----------------------------------------------------------------------------------


def plain_losses() -> list[str]:
    """Losses computable from (logp, old_logp, adv, mask) alone, by signature: entries that need
    extra tensors (``extra_inputs``, or a required positional argument after ``mask``) are left out."""
    keep = []
    for name in POLICY_LOSSES.names():
        fn = POLICY_LOSSES[name]
        params = list(inspect.signature(fn).parameters.values())[4:]
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        required = [p for p in params if p.kind in positional and p.default is inspect.Parameter.empty]
        if not extra_inputs(fn) and not required:
            keep.append(name)
    return keep


def plain_advantages() -> list[str]:
    """Advantage estimators computable from a group's rewards alone: those listing ``extra_inputs``
    (completion lengths, a greedy rollout's reward) need a real batch and are left out."""
    from rlnb.algos import ADVANTAGES

    return [name for name in ADVANTAGES.names() if not extra_inputs(ADVANTAGES[name])]


def clip_curves(fn: Callable, hyper: dict, *, rho: torch.Tensor, mu: float, A: float) -> dict:
    """``fn`` on a grid of ratios for A = +A (row 0) and -A (row 1): logp = log(mu rho), old_logp = log mu.

    Returns (2, N) float64 tensors: ``objective`` = -loss, ``weight`` (-d loss / d logp), ``low`` and
    ``high`` (bool clip flags) and ``reference`` = A rho, the unclipped importance-weighted objective.
    """
    if not 0 < mu <= 1:
        raise ValueError(f"mu: expected the old probability of the token in (0, 1], got {mu!r}")
    rho = rho.double()
    logp = torch.log(mu * rho).expand(2, -1)                           # (2, N)
    old = torch.full_like(logp, math.log(mu))                          # (2, N)
    adv = torch.tensor([A, -A], dtype=torch.float64)                   # (2,)
    out = fn(logp, old, adv, torch.ones_like(logp), **hyper)
    return {"objective": -out.loss.detach(), "weight": out.weight, "low": out.clipped_low,
            "high": out.clipped_high, "reference": adv[:, None] * rho}


def batch_tokens(fn: Callable, hyper: dict, batch, stats=None) -> dict:
    """``fn`` on a real batch's tokens, with logp = old_logp + log(ratio) from ``stats`` (ratio 1 without).

    Returns 1-D tensors over the tokens in the loss: ``ratio``, ``adv``, ``low``, ``high``.
    """
    m = batch.mask * (batch.keep[:, None].float() if batch.keep is not None else 1.0)    # (B, T)
    ratio = stats.ratio if stats is not None and stats.ratio is not None else torch.ones_like(m)
    old = batch.old_logp.double()
    out = fn(old + torch.log(ratio.double()), old, batch.adv.double(), m.double(), **hyper)
    adv = batch.adv[:, None].expand_as(m) if batch.adv.dim() == 1 else batch.adv        # (B, T)
    valid = m.bool()
    return {"ratio": ratio[valid].double(), "adv": adv[valid].double(), "low": out.clipped_low[valid],
            "high": out.clipped_high[valid]}


# --- advantages -------------------------------------------------------------------------------------


def reward_noise(G: int, n_groups: int = 1, *, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Fixed standard-normal draws (shared (n, 1), per sample (n, G)) so sliders move smoothly."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n_groups, 1, generator=gen, dtype=torch.float64), \
        torch.randn(n_groups, G, generator=gen, dtype=torch.float64)


def noisy_rewards(rewards: torch.Tensor, *, sigma_shared: float, sigma_sample: float, seed: int = 0) -> torch.Tensor:
    """(G,) rewards plus sigma_shared * one draw for the whole group plus sigma_sample * one per sample."""
    shared, own = reward_noise(len(rewards), seed=seed)
    return rewards.double() + sigma_shared * shared[0] + sigma_sample * own[0]


def advantage_samples(fn: Callable, hyper: dict, *, G: int, p: float, sigma_shared: float,
                      sigma_sample: float, n_groups: int = 2000, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages over ``n_groups`` simulated groups: each completion is right with probability ``p``
    (reward 1, else 0) plus noise. Returns (adv (n*G,), right (n*G,) bool)."""
    if not 0 <= p <= 1:
        raise ValueError(f"p: expected a success rate in [0, 1], got {p!r}")
    gen = torch.Generator().manual_seed(seed + 1)
    right = torch.rand(n_groups, G, generator=gen, dtype=torch.float64) < p        # (n, G)
    shared, own = reward_noise(G, n_groups, seed=seed)
    rewards = right.double() + sigma_shared * shared + sigma_sample * own           # (n, G)
    return fn(rewards.reshape(-1), G, **hyper), right.reshape(-1)


def odd_one_out(fn: Callable, hyper: dict, *, G: int, gaps: torch.Tensor) -> torch.Tensor:
    """|A| of the one completion with reward 1 - gap in a group whose G - 1 others got 1: how much a
    tiny difference on a nearly solved prompt is worth. Each gap is its own batch of one group (so a
    batch-level normaliser sees only that group). Returns (len(gaps),)."""
    out = []
    for gap in gaps.double():
        rewards = torch.ones(G, dtype=torch.float64)
        rewards[-1] -= gap
        out.append(fn(rewards, G, **hyper)[-1].abs())
    return torch.stack(out)


# --- KL ---------------------------------------------------------------------------------------------


def gaussian_kl(m1: float, s1: float, m2: float, s2: float) -> float:
    """KL(N(m1, s1^2) || N(m2, s2^2)) = log(s2/s1) + (s1^2 + (m1 - m2)^2) / (2 s2^2) - 1/2."""
    if s1 <= 0 or s2 <= 0:
        raise ValueError(f"s1, s2: expected positive standard deviations, got {s1!r}, {s2!r}")
    return math.log(s2 / s1) + (s1 ** 2 + (m1 - m2) ** 2) / (2 * s2 ** 2) - 0.5


def gaussian_logpdf(x: torch.Tensor, m: float, s: float) -> torch.Tensor:
    return -0.5 * ((x - m) / s) ** 2 - math.log(s) - 0.5 * math.log(2 * math.pi)


def kl_samples(fn: Callable, *, pi: tuple[float, float], ref: tuple[float, float], n: int = 4000,
               seed: int = 0) -> torch.Tensor:
    """Per-sample values of a KL estimator, x ~ pi = N(pi), logp = log pi(x), ref_logp = log ref(x). (n,)"""
    z = torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    x = pi[0] + pi[1] * z
    return fn(gaussian_logpdf(x, *pi), gaussian_logpdf(x, *ref)).detach()


def kl_weight(fn: Callable, d: torch.Tensor) -> torch.Tensor:
    """-d k / d logp at log-ratio d = logp - ref_logp: the estimator's weight on grad logp when it sits
    in the loss (multiply by beta). By autograd, so straight-through estimators show their true
    gradient. (N,)"""
    logp = d.double().clone().requires_grad_(True)
    fn(logp, torch.zeros_like(logp)).sum().backward()
    return -logp.grad


# --- aggregation ------------------------------------------------------------------------------------


def group_mask(*, G: int, n_right: int, len_right: int, len_wrong: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A hand-made group: the first ``n_right`` of G completions are right with ``len_right`` tokens,
    the others wrong with ``len_wrong``. Returns (mask (G, T) float64, right (G,) bool)."""
    if not 0 <= n_right <= G or min(len_right, len_wrong) < 1:
        raise ValueError(f"n_right, len_right, len_wrong: expected 0 <= n_right <= G={G} and lengths >= 1, "
                         f"got {n_right}, {len_right}, {len_wrong}")
    right = torch.arange(G) < n_right                                  # (G,)
    lengths = torch.where(right, len_right, len_wrong)                 # (G,)
    mask = (torch.arange(max(len_right, len_wrong))[None, :] < lengths[:, None]).double()  # (G, T)
    return mask, right


def token_weights(fn: Callable, hyper: dict, mask: torch.Tensor, *, group_size: int) -> torch.Tensor:
    """d agg / d loss_{i,t} by autograd: the weight each token's loss gets in the scalar. (B, T)"""
    loss = torch.zeros(mask.shape, dtype=torch.float64, requires_grad=True)
    fn(loss, mask.double(), group_size=group_size, **hyper).backward()
    return loss.grad * mask


# --- entropy ----------------------------------------------------------------------------------------


def thermostat_replay(entropies: list[float], **thermostat) -> list[float]:
    """The coefficient an ``EntropyThermostat`` would have used at each step, fed these entropies."""
    th = EntropyThermostat(**thermostat)
    return [th.update(e) for e in entropies]
