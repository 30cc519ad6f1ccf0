"""Hand-made data so every explorer works without a trainer: a small, fixed batch of additions.

``demo_record()`` is a ``StepRecord``-like object whose numbers are invented but consistent: the
advantages come from GRPO on the rewards, the clip flags and weights from ``ppo_clip`` on the ratios,
the KL from ``k3``. The ratios spread around 1 as after a few mini-batch steps (with one update per
batch they would all be exactly 1).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import torch

from rlnb.algos import ADVANTAGES, KL_ESTIMATORS, POLICY_LOSSES
from rlnb.batch import Batch
from rlnb.stages.update import UpdateStats

# (prompt, answer, G completions): an easy prompt most samples solve, a harder one with scratch work.
GROUPS = [
    ("23+58=", "81", ["81", "81", "81", "71"]),
    ("750+839=", "1589", ["0+9=9;5+3=8;7+8=15>1589", "1589", "0+9=9;5+3=8;7+8=14>1489", "1599"]),
]
EOS = "<eos>"


def demo_tokens(text: str) -> list[str]:
    """The default model's tokenizer is character-level: one token per character, then EOS."""
    return list(text) + [EOS]


def demo_record(*, seed: int = 0) -> SimpleNamespace:
    """A fixed record with ``.batch``, ``.stats`` and ``.metrics`` like ``Trainer.step()`` returns."""
    gen = torch.Generator().manual_seed(seed)
    rows = {"prompt": [g[0] for g in GROUPS], "answer": [g[1] for g in GROUPS]}
    G = len(GROUPS[0][2])
    completions = [c for g in GROUPS for c in g[2]]
    answers = [g[1] for g in GROUPS for _ in g[2]]
    toks = [demo_tokens(c) for c in completions]
    B, T = len(toks), max(len(t) for t in toks)
    mask = torch.zeros(B, T)
    for i, t in enumerate(toks):
        mask[i, : len(t)] = 1
    ids = torch.zeros(B, T, dtype=torch.long)                           # ids are not used by the widgets
    correct = torch.tensor([c.split(">")[-1] == a for c, a in zip(completions, answers, strict=True)])
    rewards = correct.float()                                           # (B,)
    old_logp = -torch.rand(B, T, generator=gen).mul(1.5) * mask         # (B, T) log pi_old of each token
    log_ratio = 0.15 * torch.randn(B, T, generator=gen) * mask          # (B, T)
    ref_logp = old_logp - 0.1 * torch.randn(B, T, generator=gen) * mask
    batch = Batch.from_rows(rows, G).replace(
        completion_ids=ids, mask=mask, truncated=torch.zeros(B, dtype=torch.bool), completions=completions,
        old_logp=old_logp, ref_logp=ref_logp, rewards=rewards, reward_parts={"correct": rewards},
        correct=correct, adv=ADVANTAGES["grpo"](rewards, G), keep=torch.ones(B, dtype=torch.bool))
    stats = _stats(batch, old_logp + log_ratio, gen)
    metrics = {"step": 1, "reward": float(rewards.mean()), "entropy": stats.entropy}
    return SimpleNamespace(batch=batch, stats=stats, metrics=metrics, tokens=toks)


def _stats(batch: Batch, logp: torch.Tensor, gen: torch.Generator) -> UpdateStats:
    m = batch.mask
    out = POLICY_LOSSES["ppo_clip"](logp, batch.old_logp, batch.adv, m)
    ent = torch.rand(m.shape, generator=gen) * 1.2 * m                  # (B, T) nats, below log(31)
    kl = KL_ESTIMATORS["k3"](logp, batch.ref_logp) * m                  # (B, T)
    n = m.sum()
    mean = lambda x: float((x.float() * m).sum() / n)  # noqa: E731
    return UpdateStats(
        entropy=mean(ent), kl=mean(kl), clip_low=mean(out.clipped_low), clip_high=mean(out.clipped_high),
        clip_region=mean(out.clipped_low | out.clipped_high), ratio=out.ratio, clipped_low=out.clipped_low,
        clipped_high=out.clipped_high, token_entropy=ent, token_kl=kl, weight=out.weight)


def demo_entropy_history(steps: int = 120) -> list[dict]:
    """A made-up entropy curve that collapses, as a ``Trainer.history``-like list of dicts."""
    return [{"step": s + 1, "entropy": 0.12 + 0.5 * math.exp(-s / 40) + 0.02 * math.sin(s / 3)}
            for s in range(steps)]
