"""verl 0.9.1 itself against the verl export, on CPU: its config files and its own loss and advantage functions.

For every recipe: ``to_verl(recipe)``'s overrides compose with verl's ``ppo_trainer.yaml`` through Hydra's compose
API (a key verl does not have fails the composition), every value reads back as set, and verl's own config
dataclasses (``AlgoConfig``, ``FSDPActorConfig``, ``FSDPCriticConfig``) accept them with their own checks. Then
verl's functions, called from that composed config, get the fixed batch rlnb's Updater and Advantager get:
the policy loss (``get_policy_loss_fn(loss_mode)``, ``agg_loss``, ``kl_penalty``, combined as
``verl/workers/utils/losses.ppo_loss`` does) and the advantage (``compute_advantage``'s dispatch on
``adv_estimator``). Values and gradients must agree where the report lists no gap; where it lists one, they
must differ (the report does not cry wolf).

Needs verl's wheel without its dependencies and hydra-core (``make install`` installs both; see the Makefile).
"""

import numpy as np
import pytest
import torch

pytest.importorskip("hydra", reason="the verl export's checks need hydra-core (make install)")
pytest.importorskip("omegaconf", reason="the verl export's checks need omegaconf (make install)")
from rlnb.export.verl_import import import_verl, verl_config_dir  # noqa: E402

try:
    V = import_verl()["verl.trainer.ppo.core_algos"]
except ImportError as e:  # the only skip: verl not installed
    pytest.skip(str(e), allow_module_level=True)

from hydra import compose, initialize_config_dir  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from verl.utils.config import omega_conf_to_dataclass  # noqa: E402

import rlnb  # noqa: E402
from rlnb import Batch  # noqa: E402
from rlnb.export import to_verl  # noqa: E402
from tests.export_batch import LENGTHS, TINY, G, P, T, fake_batch, rlnb_loss  # noqa: E402

NAMES = rlnb.recipes.names()
LOSS_FIELDS = {"loss", "aggregation", "beta", "kl_estimator", "entropy_aggregation", "top_entropy_quantile",
               "use_bias_correction_kl", "entropy_target"}
ADV_FIELDS = {"advantage", "whiten_advantages", "gpg_alpha_nonzero", "singleton_zero", "pass_k",
              "handle_zero_tail"}
NOISE = {"gspo": 1e-3}  # GSPO's clip range is 3e-4 / 4e-4: a smaller move clips some rows and not others


@pytest.fixture(scope="module")
def composed():
    """``compose(recipe) -> (export, verl's composed config)``, in one Hydra context."""
    with initialize_config_dir(config_dir=str(verl_config_dir()), version_base=None):
        def make(recipe, extra=()):
            exp = to_verl(recipe, steps=3)
            return exp, compose(config_name="ppo_trainer", overrides=exp.args() + list(extra))
        yield make


def tiny(name, **changes):
    return rlnb.recipes.get(name, **{**TINY, **changes})


@pytest.mark.parametrize("name", NAMES)
def test_overrides_compose_with_verls_config(name, composed):
    exp, cfg = composed(tiny(name))
    assert len(exp.args()) == len(exp.overrides) > 30
    got = {k: OmegaConf.to_object(v) if OmegaConf.is_config(v) else v
           for k, v in ((k, OmegaConf.select(cfg, k)) for k in exp.overrides)}
    assert got == exp.overrides                                   # every value as set, none lost or cast
    actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)  # verl's own checks (batch sizes, modes)
    algo = omega_conf_to_dataclass(cfg.algorithm)
    assert actor.policy_loss.loss_mode in V.POLICY_LOSS_REGISTRY
    assert algo.adv_estimator in V.ADV_ESTIMATOR_REGISTRY
    assert actor.ppo_mini_batch_size * exp.recipe.num_mini_batches == cfg.data.train_batch_size
    if exp.recipe.critic:
        critic = omega_conf_to_dataclass(cfg.critic)
        assert algo.adv_estimator == "gae" and critic.cliprange_value == exp.recipe.cliprange_value


def test_a_key_verl_lacks_fails_the_composition(composed):
    """The check above has teeth: Hydra refuses a key that verl's config does not declare."""
    with pytest.raises(Exception, match="no_such_key"):
        composed(tiny("grpo"), ["algorithm.no_such_key=1"])


def verl_loss(cfg, t):
    """verl's actor loss from the composed config: policy loss + entropy bonus + KL loss, as ``ppo_loss``."""
    actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    actor.global_batch_info.update(dp_size=1, batch_num_tokens=None, global_batch_size=None,
                                   loss_scale_factor=actor.loss_scale_factor)
    logp, ent = t["logp"].clone().requires_grad_(True), t["ent"].clone().requires_grad_(True)
    mask = t["mask"].bool()
    adv = t["adv"][:, None].expand(-1, T) * mask                 # (B, T) verl's advantages are per token
    agg = dict(loss_mask=mask, loss_agg_mode=actor.loss_agg_mode, **actor.global_batch_info)
    total, _ = V.get_policy_loss_fn(actor.policy_loss.loss_mode)(
        old_log_prob=t["old"], log_prob=logp, advantages=adv, response_mask=mask,
        loss_agg_mode=actor.loss_agg_mode, config=actor, rollout_is_weights=None)
    if actor.entropy_coeff:
        total = total - actor.entropy_coeff * V.agg_loss(loss_mat=ent, **agg)
    if actor.use_kl_loss:
        kl = V.kl_penalty(logprob=logp, ref_logprob=t["ref"], kl_penalty=actor.kl_loss_type)
        total = total + actor.kl_loss_coef * V.agg_loss(loss_mat=kl, **agg)
    total.backward()
    return total.detach(), logp.grad, ent.grad


LOSS_CASES = {name: tiny(name) for name in NAMES} | {
    "grpo beta=0.04 (k3 loss)": tiny("grpo", beta=0.04),
    "dapo beta=0.04 k1+": tiny("dapo", beta=0.04, kl_estimator="k1+"),
    "grpo dual-clip": tiny("grpo", dual_clip_c=1.5),
    "dapo entropy bonus": tiny("dapo", entropy_coef=0.01),
    "grpo entropy bonus, verl's rule": tiny("grpo", entropy_coef=0.05, entropy_aggregation="loss-aggregation"),
    "grpo entropy bonus, TRL's rule (a gap)": tiny("grpo", entropy_coef=0.05),
    "cispo absolute cap": tiny("cispo", cispo_cap=1.1),
    "sapo": tiny("grpo", loss="sapo"),
    "dro": tiny("grpo", loss="dro", dro_beta=1.0),
    "dppo_kl": tiny("dppo", loss="dppo_kl"),
    "geo_mean": tiny("grpo", loss="geo_mean"),
    "vespo (a gap)": tiny("grpo", loss="vespo", aggregation="token-mean"),
}


@pytest.mark.parametrize("case", list(LOSS_CASES))
def test_loss_equals_verl(case, composed):
    recipe = LOSS_CASES[case]
    exp, cfg = composed(recipe)
    t = fake_batch(noise=NOISE.get(recipe.loss, 0.3) if recipe.loss != "dppo_kl" else 0.6)
    ours, theirs = rlnb_loss(recipe, t), verl_loss(cfg, t)
    gaps = {g.field for g in exp.unsupported} & LOSS_FIELDS
    if gaps:                                                    # listed: verl's number differs
        assert not (torch.allclose(ours[0], theirs[0]) and torch.allclose(ours[1], theirs[1])), gaps
        return
    torch.testing.assert_close(ours[0], theirs[0], rtol=1e-12, atol=1e-12)      # loss value
    torch.testing.assert_close(ours[1], theirs[1], rtol=1e-10, atol=1e-12)      # d loss / d logp, per token
    if recipe.entropy_coef:
        torch.testing.assert_close(ours[2], theirs[2], rtol=1e-10, atol=1e-12)  # d loss / d entropy
    assert ours[1].abs().sum() > 0 and ours[0] != 0


def fixed_rewards(seed=0):
    """Rewards with a saturated group (all 1), a mixed one; parts for GDPO; lengths from LENGTHS."""
    correct = torch.tensor([1., 1, 1, 1, 0, 1])[: P * G]
    fmt = torch.tensor([1., 0, 1, 1, 1, 0])[: P * G]
    return correct, fmt


def verl_advantage(cfg, rewards, mask, parts, values=None):
    """``compute_advantage``'s dispatch (verl/trainer/ppo/ray_trainer.py) on the composed ``algorithm``."""
    algo = omega_conf_to_dataclass(cfg.algorithm)
    B = rewards.shape[0]
    lengths = mask.sum(-1).long()
    token_rewards = torch.zeros(B, T, dtype=rewards.dtype).index_put_((torch.arange(B), lengths - 1), rewards)
    index = np.repeat(np.arange(B // G), G).astype(str)
    if algo.adv_estimator == "gae":
        adv, _ = V.compute_gae_advantage_return(token_rewards, values, mask, gamma=algo.gamma, lam=algo.lam)
        return adv
    if algo.adv_estimator == "grpo":
        adv, _ = V.compute_grpo_outcome_advantage(token_rewards, mask, index,
                                                  norm_adv_by_std_in_grpo=algo.norm_adv_by_std_in_grpo)
        return adv
    kw = {}
    if algo.adv_estimator == "gdpo":
        batch = {"prompts": torch.zeros(B, 3), "attention_mask": torch.cat([torch.ones(B, 3), mask], 1).long()}
        kw = {"non_tensor_batch": {k: v.numpy() for k, v in parts.items()}, "batch": batch}
    adv, _ = V.get_adv_estimator_fn(algo.adv_estimator)(token_level_rewards=token_rewards, response_mask=mask,
                                                         config=algo, index=index, **kw)
    return adv


def rlnb_advantage(recipe, rewards, mask, parts, values=None):
    """rlnb's Advantager (the estimator the Trainer binds) on the same rewards."""
    trainer = rlnb.Trainer.tiny(recipe)
    B = rewards.shape[0]
    w = torch.tensor([1.0, recipe.format_weight]).expand(B, -1)
    batch = Batch(["p"] * B, ["a"] * B, torch.arange(B) // G, G, rewards=rewards.float(), mask=mask,
                  correct=parts["correct"] > 0, truncated=torch.zeros(B, dtype=torch.bool),
                  reward_parts=parts, old_logp=torch.zeros(B, T), old_values=values,
                  completion_ids=torch.ones(B, T, dtype=torch.long), extras={"reward_weights": w})
    adv = trainer.advantager.step(batch).adv
    return adv if adv.dim() == 2 else adv[:, None] * mask


@pytest.mark.parametrize("name", NAMES)
def test_advantage_equals_verl(name, composed):
    recipe = tiny(name)
    exp, cfg = composed(recipe)
    mask = (torch.arange(T)[None] < torch.tensor(LENGTHS)[:, None]).float()     # (B, T)
    correct, fmt = fixed_rewards()
    parts = {"correct": correct, "format": fmt}
    rewards = correct + recipe.format_weight * fmt
    values = torch.linspace(-0.5, 0.8, P * G * T).reshape(P * G, T) * mask if recipe.critic else None
    ours = rlnb_advantage(recipe, rewards, mask, parts, values)
    theirs = verl_advantage(cfg, rewards, mask, parts, values).float() * mask  # verl's whitening leaves the
    # padding nonzero (no token of the loss reads it)
    if {g.field for g in exp.unsupported} & ADV_FIELDS:
        assert not torch.allclose(ours, theirs, atol=1e-5), exp.unsupported
        return
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    assert ours.abs().sum() > 0


@pytest.mark.parametrize("name", ["rloo", "ppo"])
def test_kl_in_the_reward_equals_verl(name, composed):
    """The KL in the reward: rlnb's Rewarder and Advantager against verl's ``apply_kl_penalty`` (token rewards
    minus kl_coef x ``kl_penalty(old, ref, algorithm.kl_penalty)``) and its estimator. Equal for an outcome
    estimator (RLOO sums the token rewards); for GAE the placement differs, as the report says."""
    recipe = tiny(name)
    exp, cfg = composed(recipe)
    algo = omega_conf_to_dataclass(cfg.algorithm)
    t = fake_batch(noise=0.3)
    mask, B = t["mask"].float(), P * G
    correct = torch.tensor([1., 0, 1, 1, 1, 0])
    trainer = rlnb.Trainer.tiny(recipe)
    answers = ["531"] * B
    completions = ["4+7=11;8+4=12;2+2=4>531" if c else "nope" for c in correct.tolist()]
    batch = Batch(["284+247="] * B, answers, torch.arange(B) // G, G, completions=completions, mask=mask,
                  old_logp=t["old"].float(), ref_logp=t["ref"].float(), completion_ids=t["ids"])
    scored = trainer.rewarder.step(batch)
    kld = V.kl_penalty(t["old"].float(), t["ref"].float(), algo.kl_penalty) * mask
    lengths = mask.sum(-1).long()
    scores = torch.zeros(B, T).index_put_((torch.arange(B), lengths - 1), scored.reward_parts["correct"])
    token_rewards = scores - algo.kl_ctrl.kl_coef * kld                                  # apply_kl_penalty
    torch.testing.assert_close(scored.rewards, token_rewards.sum(-1), rtol=1e-6, atol=1e-6)
    assert scored.reward_parts["kl_penalty"].abs().sum() > 0
    values = torch.linspace(-0.5, 0.8, B * T).reshape(B, T) * mask if recipe.critic else None
    ours = trainer.advantager.step(scored.replace(old_values=values)).adv
    ours = ours if ours.dim() == 2 else ours[:, None] * mask
    index = np.repeat(np.arange(P), G).astype(str)
    if recipe.critic:
        theirs, _ = V.compute_gae_advantage_return(token_rewards, values, mask, gamma=algo.gamma, lam=algo.lam)
        assert "kl_in_reward" in {g.field for g in exp.differences}
        assert not torch.allclose(ours, theirs * mask, atol=1e-4)
    else:
        theirs, _ = V.get_adv_estimator_fn(algo.adv_estimator)(token_level_rewards=token_rewards, response_mask=mask,
                                                               config=algo, index=index)
        torch.testing.assert_close(ours, theirs * mask, rtol=1e-5, atol=1e-6)
