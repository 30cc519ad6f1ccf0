"""The rollout-correction options TRL 1.16 has, against TRL's own ``_compute_loss``: its vLLM importance
sampling (four modes), the off-policy sequence mask, the importance-corrected KL and the VESPO loss.

TRL computes ``importance_sampling_ratio`` while it generates (``_generate_and_score_completions``, not callable
alone); ``trl_ratio`` below transcribes those lines, and TRL's ``_compute_loss`` applies the ratio, the mask,
the KL factor and VESPO's folding. rlnb's side is the Updater with the recipe's registry entries.
"""

import math

import pytest
import torch

pytest.importorskip("trl", reason="the TRL bridge needs trl (pip install 'rlnb[trl]')")

import rlnb  # noqa: E402
from rlnb.export import trl_mapping  # noqa: E402
from tests.test_export_trl import TINY, fake_batch, rlnb_loss, trl_loss  # noqa: E402

LOSS_FIELDS = {"loss", "aggregation", "rollout_correction", "rollout_is_min", "rollout_is_max", "bypass_mode",
               "off_policy_mask_threshold", "vespo_k_pos", "vespo_k_neg", "vespo_lambda_pos", "vespo_lambda_neg"}


def gaps(m):
    """The loss-side settings TRL cannot express (dapo's dynamic sampling is no loss setting)."""
    return {g.field for g in m.unsupported} & LOSS_FIELDS


def with_mu(t, noise=0.4, seed=5):
    """A sampler whose log-probs mu differ from the trainer's pi_old by ``noise`` per token."""
    g = torch.Generator().manual_seed(seed)
    mu = (t["old"] + noise * torch.randn(t["old"].shape, generator=g, dtype=torch.float64)) * t["mask"]
    return {**t, "mu": mu}


def trl_ratio(t, mode, lo, hi):
    """TRL 1.16's vLLM IS ratio: exp(old - mu) per token or exp(sum) per sequence, then truncated or masked."""
    diff = (t["old"] - t["mu"]) * t["mask"]
    r = torch.exp(diff.sum(-1, keepdim=True) if mode.startswith("sequence") else diff)
    if mode.endswith("truncate"):
        return torch.clamp(r, min=lo, max=hi)
    return r.masked_fill((r < (lo if lo is not None else -math.inf)) | (r > (hi if hi is not None else math.inf)), 0.0)


def check(recipe, t):
    ours, trls = rlnb_loss(recipe, t), trl_loss(recipe, t)
    torch.testing.assert_close(ours[0], trls[0], rtol=1e-10, atol=1e-12)       # loss value
    torch.testing.assert_close(ours[1], trls[1], rtol=1e-9, atol=1e-12)        # d loss / d logp
    assert ours[1].abs().sum() > 0 and ours[0] != 0
    return ours


@pytest.mark.parametrize("mode", ["token_truncate", "token_mask", "sequence_truncate", "sequence_mask"])
@pytest.mark.parametrize("loss", ["dapo", "grpo"])
def test_rollout_is_modes_equal_trls_vllm_correction(mode, loss):
    lo, hi = (0.7, 1.4) if mode.startswith("token") else (0.5, 2.0)
    recipe = rlnb.recipes.get(loss, rollout_correction=(mode,), rollout_is_min=lo, rollout_is_max=hi, **TINY)
    m = trl_mapping(recipe)
    assert (m.kwargs["vllm_importance_sampling_mode"], m.kwargs["vllm_importance_sampling_clip_min"],
            m.kwargs["vllm_importance_sampling_clip_max"]) == (mode, lo, hi) and not gaps(m)
    t = with_mu(fake_batch(noise=0.3), noise=0.3 if mode.startswith("token") else 0.2)
    r = trl_ratio(t, mode, lo, hi)
    assert ((r == 0) | (r == lo) | (r == hi)).any() and not ((r == 0) | (r == lo) | (r == hi)).all()  # bounds bite
    t["is_ratio"] = r
    ours = check(recipe, t)
    plain = rlnb_loss(rlnb.recipes.get(loss, **TINY), t)
    assert not torch.allclose(ours[1], plain[1])                               # the correction changed something


def test_off_policy_mask_equals_trl():
    recipe = rlnb.recipes.get("dapo", rollout_correction=("off_policy_mask",), off_policy_mask_threshold=0.05, **TINY)
    assert trl_mapping(recipe).kwargs["off_policy_mask_threshold"] == 0.05
    t = with_mu(fake_batch(noise=0.3))
    kl = ((t["mu"] - t["logp"]) * t["mask"]).sum(-1) / t["mask"].sum(-1)
    dropped = (t["adv"] < 0) & (kl > 0.05)
    assert dropped.any() and ((t["adv"] < 0) & ~dropped).any()               # some negative rows kept, some not
    ours = check(recipe, t)
    assert (ours[1][dropped] == 0).all()                                       # a dropped row gets no gradient


@pytest.mark.parametrize("loss", ["grpo", "dapo"])
def test_importance_corrected_kl_equals_trls_bias_correction(loss):
    recipe = rlnb.recipes.get(loss, beta=0.04, use_bias_correction_kl=True, **TINY)
    assert trl_mapping(recipe).kwargs["use_bias_correction_kl"] is True
    t = fake_batch(noise=0.3)
    ours = check(recipe, t)
    plain = rlnb_loss(rlnb.recipes.get(loss, beta=0.04, **TINY), t)
    assert not torch.allclose(ours[0], plain[0])


@pytest.mark.parametrize("with_is", [False, True])
def test_vespo_equals_trl_with_and_without_the_vllm_ratio(with_is):
    extra = dict(rollout_correction=("token_truncate",), rollout_is_min=0.8, rollout_is_max=1.25) if with_is else {}
    recipe = rlnb.recipes.get("dapo", loss="vespo", vespo_k_neg=2.5, **extra, **TINY)
    m = trl_mapping(recipe)
    assert (m.kwargs["loss_type"], m.kwargs["vespo_k_neg"]) == ("vespo", 2.5) and not gaps(m)
    t = fake_batch(noise=0.05)
    if with_is:
        t = with_mu(t, noise=0.2)
        t["is_ratio"] = trl_ratio(t, "token_truncate", 0.8, 1.25)
    check(recipe, t)
