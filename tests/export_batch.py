"""The fixed batch the export tests give both sides (rlnb's Updater and the other trainer's own loss code), and
rlnb's loss on it. No trl or verl needed: ``tests/test_export_trl*.py`` and ``tests/test_export_verl*.py`` share it.
"""

import torch

import rlnb
import rlnb.stages.update as update_mod
from rlnb import Batch
from rlnb.core.forward_options import using
from rlnb.models.forward import PolicyOut

P, G, T = 2, 3, 5
LENGTHS = [5, 3, 1, 4, 2, 5]  # valid tokens per row, right-padded
TINY = dict(prompts_per_step=P, num_generations=G, max_new_tokens=8, warmup_steps=0)


def fake_batch(*, noise: float, seed: int = 0, rows_masked=()):
    """Log-probs of a policy that moved away from the rollout policy by ``noise`` (so ratios leave 1 and
    clipping fires), signed advantages, and a reference policy; float64 so the two sides agree to 1e-12."""
    g = torch.Generator().manual_seed(seed)
    B = P * G
    mask = (torch.arange(T)[None] < torch.tensor(LENGTHS)[:, None]).long()          # (B, T)
    mask[list(rows_masked)] = 0
    logp = -torch.rand(B, T, generator=g, dtype=torch.float64) * 2 * mask          # (B, T)
    old = (logp + noise * torch.randn(B, T, generator=g, dtype=torch.float64)) * mask
    ref = (logp + 0.2 * torch.randn(B, T, generator=g, dtype=torch.float64)) * mask
    ent = torch.rand(B, T, generator=g, dtype=torch.float64) * mask
    adv = torch.tensor([1.2, -0.3, -0.9, 0.5, -1.4, 0.9], dtype=torch.float64)      # (B,)
    ids = torch.randint(3, 50, (B, T), generator=g) * mask
    prompt_ids, prompt_mask = torch.randint(3, 50, (B, 4), generator=g), torch.ones(B, 4, dtype=torch.long)
    return dict(logp=logp, old=old, ref=ref, ent=ent, adv=adv, mask=mask, ids=ids, prompt_ids=prompt_ids,
                prompt_mask=prompt_mask)


def rlnb_loss(recipe, t):
    """rlnb's Updater loss (the registry entries the Trainer binds) on the given log-probs; with a critic,
    the actor's part alone (the value head's term left out: the other trainers train their critic apart)."""
    trainer = rlnb.Trainer.tiny(recipe)
    logp, ent = t["logp"].clone().requires_grad_(True), t["ent"].clone().requires_grad_(True)
    B = P * G
    zeros = torch.zeros_like(t["old"]) if recipe.critic else None                   # (B, T) values, returns
    batch = Batch(["p"] * B, ["a"] * B, torch.arange(B) // G, G, prompt_ids=t["prompt_ids"],
                  prompt_mask=t["prompt_mask"], completion_ids=t["ids"], mask=t["mask"].double(), old_logp=t["old"],
                  ref_logp=t["ref"], adv=t["adv"], keep=torch.ones(B, dtype=torch.bool), rollout_logp=t.get("mu"),
                  old_values=zeros, returns=zeros)
    saved = update_mod.completion_logprobs
    update_mod.completion_logprobs = lambda *a, **k: PolicyOut(logp, ent, zeros, None, None)
    try:
        with using(backward="all"):             # the stub returns every row's log-probs, whatever rows are asked
            out = trainer.updater.loss(batch)
        total = out.total - out.terms.get("value", 0.0)
    finally:
        update_mod.completion_logprobs = saved
    total.backward()
    return total.detach(), logp.grad, ent.grad
