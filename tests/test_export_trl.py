"""TRL's own loss code against rlnb's on the same batch, the exported GRPOConfig, and a CPU smoke run.

The cross-check replaces only the log-prob computation on both sides with the same given tensors:
TRL's ``GRPOTrainer._get_per_token_logps_and_entropies`` (its model forward) and rlnb's
``completion_logprobs`` (the Updater's). Everything after that is each library's own code: TRL's
``_compute_loss`` (ratio, clip, KL, aggregation by ``loss_type``) and rlnb's ``Updater._loss`` (policy-loss,
KL and aggregation registry entries, bound from the recipe). Loss values and gradients must agree.
"""

import pytest
import torch

trl = pytest.importorskip("trl", reason="the TRL bridge needs trl (pip install 'rlnb[trl]')")

import rlnb  # noqa: E402
from rlnb import Batch  # noqa: E402
from rlnb.export import to_trl, trl_mapping  # noqa: E402
from tests.export_batch import LENGTHS, TINY, G, P, T, fake_batch, rlnb_loss  # noqa: E402,F401

NO_CKPT = {"gradient_checkpointing": False}
LOSS_FIELDS = {"loss", "aggregation", "eps_low", "eps_high", "dual_clip_c", "cispo_cap", "beta", "kl_estimator",
               "kl_in_reward", "critic", "entropy_coef", "entropy_aggregation", "top_entropy_quantile"}


def trl_loss(recipe, t, *, num_items=None):
    """TRL's ``GRPOTrainer._compute_loss`` with the exported config, on the given log-probs."""
    exp = to_trl(recipe, trl_args=NO_CKPT, output_dir="/tmp/rlnb-trl-test")
    model, tok = rlnb.load_default()
    trainer = exp.trainer(model, tok, train_dataset=exp.dataset(8))
    logp, ent = t["logp"].clone().requires_grad_(True), t["ent"].clone().requires_grad_(True)
    trainer._get_per_token_logps_and_entropies = lambda *a, **k: (logp, ent, None)
    trainer.current_gradient_accumulation_steps = 1
    trainer.model.train()
    inputs = {"prompt_ids": t["prompt_ids"], "prompt_mask": t["prompt_mask"], "completion_ids": t["ids"],
              "completion_mask": t["mask"], "advantages": t["adv"], "old_per_token_logps": t["old"],
              "ref_per_token_logps": t["ref"],
              "num_items_in_batch": t["mask"].sum() if num_items is None else torch.tensor(num_items)}
    if "mu" in t:  # the sampler's own log-probs (vLLM's in TRL) and TRL's IS ratio made from them
        inputs["sampling_per_token_logps"] = t["mu"]
    if "is_ratio" in t:
        inputs["importance_sampling_ratio"] = t["is_ratio"]
        trainer.use_vllm = True                                      # TRL applies the ratio only with vLLM
    loss = trainer._compute_loss(trainer.model, inputs)
    loss.backward()
    return loss.detach(), logp.grad, ent.grad


CASES = {  # recipe, and how far the policy moved from the rollout (GSPO's clip range is 3e-4 / 4e-4)
    "grpo": (rlnb.recipes.get("grpo", **TINY), 0.3),
    "grpo beta=0.04": (rlnb.recipes.get("grpo", beta=0.04, **TINY), 0.3),
    "grpo dual-clip": (rlnb.recipes.get("grpo", dual_clip_c=1.5, **TINY), 0.6),
    "dr_grpo": (rlnb.recipes.get("dr_grpo", **TINY), 0.3),
    "dapo": (rlnb.recipes.get("dapo", **TINY), 0.3),
    "dapo entropy bonus": (rlnb.recipes.get("dapo", entropy_coef=0.01, **TINY), 0.3),
    # TRL's bonus is a token mean over the pushed tokens for every loss type (rlnb's default rule)
    "grpo entropy bonus": (rlnb.recipes.get("grpo", entropy_coef=0.05, **TINY), 0.3),
    "grpo entropy bonus, top-entropy mask": (rlnb.recipes.get("grpo", entropy_coef=0.05, top_entropy_quantile=0.4,
                                                              **TINY), 0.3),
    "dapo entropy bonus, top-entropy mask": (rlnb.recipes.get("dapo", entropy_coef=0.05, top_entropy_quantile=0.5,
                                                              **TINY), 0.3),
    "dr_grpo entropy bonus": (rlnb.recipes.get("dr_grpo", entropy_coef=0.05, **TINY), 0.3),
    "cispo": (rlnb.recipes.get("cispo", num_mini_batches=1, eps_high=0.2, **TINY), 0.3),
    "cispo abs. cap": (rlnb.recipes.get("cispo", num_mini_batches=1, cispo_cap=1.1, **TINY), 0.3),
    "gspo": (rlnb.recipes.get("gspo", **TINY), 1e-3),
    # TRL builds SAPO's temperatures with torch.where on Python floats, i.e. in fp32, where 1.05 (the default
    # tau_neg) is 1.0499999523: a 4e-8 relative difference in fp64. 1.25 is exact in fp32.
    "sapo": (rlnb.recipes.get("grpo", loss="sapo", tau_neg=1.25, **TINY), 0.3),
    "luspo (ppo_clip, seq-mean-token-sum)": (rlnb.recipes.get("grpo", aggregation="seq-mean-token-sum", **TINY), 0.3),
}


@pytest.mark.parametrize("case", list(CASES))
def test_loss_equals_trl(case):
    recipe, noise = CASES[case]
    assert not {g.field for g in trl_mapping(recipe).unsupported} & LOSS_FIELDS   # dapo: only its sampler is not
    t = fake_batch(noise=noise)
    ours, trls = rlnb_loss(recipe, t), trl_loss(recipe, t)
    torch.testing.assert_close(ours[0], trls[0], rtol=1e-12, atol=1e-12)      # loss value
    torch.testing.assert_close(ours[1], trls[1], rtol=1e-10, atol=1e-12)      # d loss / d logp, per token
    if recipe.entropy_coef:
        torch.testing.assert_close(ours[2], trls[2], rtol=1e-10, atol=1e-12)  # d loss / d entropy
    assert ours[1].abs().sum() > 0 and ours[0] != 0                           # a case with something to compare


def test_the_cases_clip_some_tokens_and_not_others():
    """Otherwise the cross-check would not exercise the clip bounds (PPO clip: rho above 1 + eps_high with
    A > 0 or below 1 - eps_low with A < 0; GSPO: the same on the sequence ratio; CISPO: rho above the cap)."""
    for case in ("grpo", "dapo", "gspo", "cispo", "grpo dual-clip"):
        r, noise = CASES[case]
        t = fake_batch(noise=noise)
        valid, A = t["mask"].bool(), t["adv"][:, None].expand(-1, T)
        log_rho = t["logp"] - t["old"]
        if r.loss == "gspo":
            log_rho = ((log_rho * t["mask"]).sum(-1) / t["mask"].sum(-1))[:, None].expand(-1, T)
        rho, hp = torch.exp(log_rho), r.hyperparameters()["loss"]       # the clip values that run
        if r.loss == "cispo":
            clipped = rho > 1 + hp["eps_high"]
        else:
            clipped = ((rho > 1 + hp["eps_high"]) & (A > 0)) | ((rho < 1 - hp["eps_low"]) & (A < 0))
            if hp.get("dual_clip_c"):
                dual = (rho > hp["dual_clip_c"]) & (A < 0)
                assert dual[valid].any(), case                           # the dual-clip bound is hit
                clipped = clipped | dual
        assert clipped[valid].any() and not clipped[valid].all(), case


def test_documented_difference_masked_rows_in_a_sequence_mean():
    """grpo with overlong filtering: TRL averages over all B rows, rlnb over the kept ones (listed)."""
    recipe = rlnb.recipes.get("grpo", filters=("overlong",), **TINY)
    assert "filters" in {g.field for g in trl_mapping(recipe).differences}
    t = fake_batch(noise=0.3, rows_masked=(1, 4))                    # two truncated rows, masked out
    ours, trls = rlnb_loss(recipe, t), trl_loss(recipe, t)
    torch.testing.assert_close(trls[0], ours[0] * 4 / 6, rtol=1e-12, atol=1e-12)


def test_documented_difference_token_mean_over_mini_batches():
    """cispo with 2 mini-batches: TRL divides by the batch's mean tokens per mini-batch (listed)."""
    recipe = rlnb.recipes.get("cispo", **TINY)
    assert "num_mini_batches" in {g.field for g in trl_mapping(recipe).differences}
    t = fake_batch(noise=0.3)
    tokens, other = int(t["mask"].sum()), 11                         # this mini-batch, and the other one's
    ours, trls = rlnb_loss(recipe, t), trl_loss(recipe, t, num_items=tokens + other)
    torch.testing.assert_close(trls[0], ours[0] * tokens / ((tokens + other) / 2), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", rlnb.recipes.names())
def test_exported_config_carries_the_mapping(name):
    """TRL's GRPOConfig keeps every mapped value (no TRL default or post-init overwrote one)."""
    exp = to_trl(name, output_dir="/tmp/rlnb-trl-test")
    m = trl_mapping(name)
    assert {k: getattr(exp.config, k) for k in m.kwargs} == m.kwargs
    assert exp.config.reward_weights == list(m.reward_weights.values())
    assert exp.config.generation_batch_size == exp.recipe.prompts_per_step * exp.recipe.num_generations
    assert [str(g) for g in exp.unsupported] == [str(g) for g in m.unsupported]
    assert len(exp.reward_funcs) == len(m.reward_weights)
    for gap in exp.unsupported + exp.differences:
        assert str(gap) in exp.report()


def test_strict_export_refuses_what_trl_cannot_express():
    with pytest.raises(ValueError, match="dynamic_sampling"):
        to_trl("dapo", strict=True, output_dir="/tmp/rlnb-trl-test")


def test_dataset_is_the_trainer_pool_and_chat_rows_are_messages():
    exp = to_trl("grpo", output_dir="/tmp/rlnb-trl-test")
    pool = rlnb.Trainer.tiny("grpo", seed=3).pool
    assert exp.dataset(len(pool), seed=3)["prompt"][:5] == pool["prompt"][:5]
    chat = to_trl("grpo", chat_template=True, system_prompt="Be brief.", output_dir="/tmp/rlnb-trl-test")
    plain, row = exp.dataset(4)[0], chat.dataset(4)[0]
    assert row["prompt"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": plain["prompt"]}]
    assert row["answer"] == plain["answer"]


def test_two_step_trl_run_on_cpu(tmp_path):
    """TRL's GRPOTrainer with the exported dapo recipe, two optimizer steps on the embedded default."""
    from rlnb.export.launch import main

    out = tmp_path / "run"
    trainer = main(["--recipe", "dapo", "--task", "add", "--steps", "2", "--output-dir", str(out), "--seed", "0",
                    "--prompts-per-step", "2", "--num-generations", "4", "--lr", "1e-3",
                    "--warmup-steps", "0", "--no-gradient-checkpointing", "--quiet"])
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert trainer.state.global_step == 2 and len(logs) == 2
    assert all("rewards/overlong/mean" in h and "rewards/add_correct/mean" in h for h in logs)
    before = rlnb.load_default()[0].state_dict()
    moved = any(not torch.equal(p, before[n]) for n, p in trainer.model.state_dict().items())
    any_signal = any(h["frac_reward_zero_std"] < 1 for h in logs)
    assert any_signal and moved                      # some group had signal, and the update reached the weights


def test_loss_and_gradient_equal_trl_through_a_real_forward():
    """The same check with each library's own log-probs from the same model (temperature 0.7): TRL's fused
    LM head against rlnb's forward; prompts are left-padded (TRL passes no position ids: RoPE only sees
    relative positions, so this agrees to fp32 rounding)."""
    recipe = rlnb.recipes.get("grpo", temperature=0.7, beta=0.04, **TINY)
    ours = rlnb.Trainer.tiny(recipe, "countdown", seed=0)
    rows = {"prompt": ["[8 16 5]>29:", "[4 10 10]>104:"], "answer": ["8+16+5", "4*10*10/4"]}  # 12 and 14 characters
    batch = ours.advantager.step(ours.rewarder.step(ours.sampler.step(Batch.from_rows(rows, G))))
    exp = to_trl(recipe, "countdown", trl_args=NO_CKPT, output_dir="/tmp/rlnb-trl-test")
    trainer = exp.trainer(ours.model, ours.tokenizer, train_dataset=exp.dataset(8))
    trainer.current_gradient_accumulation_steps = 1
    old = batch.old_logp + 0.1 * torch.randn(batch.old_logp.shape, generator=torch.Generator().manual_seed(0))
    batch = batch.replace(old_logp=old * batch.mask, adv=torch.linspace(-1, 1, batch.B))  # ratios leave 1
    inputs = {"prompt_ids": batch.prompt_ids, "prompt_mask": batch.prompt_mask, "completion_ids": batch.completion_ids,
              "completion_mask": batch.mask.long(), "advantages": batch.adv, "old_per_token_logps": batch.old_logp,
              "ref_per_token_logps": batch.ref_logp, "num_items_in_batch": batch.mask.sum()}
    weight = ours.model.get_input_embeddings().weight
    grads = []
    for loss_of in (lambda: ours.updater.loss(batch).total, lambda: trainer._compute_loss(trainer.model, inputs)):
        ours.model.zero_grad()
        ours.model.train()
        loss = loss_of()
        loss.backward()
        grads.append((loss.detach(), weight.grad.clone()))
    assert (batch.prompt_mask == 0).any()                                      # left padding is exercised
    torch.testing.assert_close(grads[0][0], grads[1][0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grads[0][1], grads[1][1], rtol=1e-4, atol=1e-6)
    assert grads[0][1].abs().sum() > 0


def test_verls_entropy_rule_is_listed_and_differs_from_trl():
    """entropy_aggregation='loss-aggregation' (verl) under seq-mean-token-mean: listed, and TRL's number differs."""
    recipe = rlnb.recipes.get("grpo", entropy_coef=0.05, entropy_aggregation="loss-aggregation", **TINY)
    assert "entropy_aggregation" in {g.field for g in trl_mapping(recipe).unsupported}
    t = fake_batch(noise=0.3)
    ours, trls = rlnb_loss(recipe, t), trl_loss(recipe, t)
    assert not torch.allclose(ours[2], trls[2])                      # d loss / d entropy: per row vs per token
