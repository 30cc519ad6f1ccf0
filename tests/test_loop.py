"""The four stages run by hand on the embedded default, field by field, and the Trainer around them."""

import math

import pytest
import torch

import rlnb
from rlnb import Batch
from rlnb.algos import ADVANTAGES, AGGREGATIONS, POLICY_LOSSES, bind
from rlnb.models.forward import completion_logprobs
from rlnb.stages import Advantager, Rewarder, Sampler, Updater, make_optimizer

P, G, T_MAX = 3, 4, 24


@pytest.fixture
def stages(model_and_tokenizer):
    model, tok = model_and_tokenizer
    task = rlnb.tasks.get("add")
    rows = task.dataset(P, seed=5)
    recipe = rlnb.recipes.get("grpo")
    opt, sched = make_optimizer(model, lr=1e-4)
    return dict(
        model=model, tok=tok, task=task, batch=Batch.from_rows(rows[:], G),
        sampler=Sampler(model, tok, max_new_tokens=T_MAX, generator=torch.Generator().manual_seed(1)),
        rewarder=Rewarder.for_task(task), advantager=Advantager(bind(ADVANTAGES["grpo"], recipe)),
        updater=Updater(model, opt, sched, loss_fn=bind(POLICY_LOSSES["ppo_clip"], recipe),
                        agg_fn=bind(AGGREGATIONS["seq-mean-token-mean"], recipe)),
    )


def test_prompt_batch_repeats_each_prompt_G_times(stages):
    b = stages["batch"]
    assert (b.B, b.P, b.group_size) == (P * G, P, G)
    assert b.prompts[:G] == [b.prompts[0]] * G and b.prompts[G] != b.prompts[0]
    assert b.prompt_index.tolist() == [0] * G + [1] * G + [2] * G


def test_sampler_fields(stages):
    b, tok = stages["sampler"].step(stages["batch"]), stages["tok"]
    B, T = b.B, b.completion_ids.shape[1]
    assert T <= T_MAX and b.completion_ids.dtype == torch.long and b.old_logp.dtype == torch.float32
    assert b.mask.shape == b.old_logp.shape == (B, T) and b.truncated.shape == (B,)
    assert b.ref_logp is None                                      # no reference model: beta = 0
    for i in range(B):
        ids, m = b.completion_ids[i], b.mask[i].bool()
        eos = (ids == tok.eos_token_id).nonzero().flatten()
        if b.truncated[i]:
            assert len(eos) == 0 and m.all()                       # mask covers every generated token
        else:
            n = int(eos[0]) + 1
            assert m[:n].all() and not m[n:].any()                  # up to and including the first EOS
            assert (ids[n:] == tok.pad_token_id).all()
        assert b.completions[i] == tok.decode(ids[m], skip_special_tokens=True)
    assert (b.old_logp[~b.mask.bool()] == 0).all() and (b.old_logp[b.mask.bool()] < 0).all()
    # prompts are left-padded: every row's last prompt token is real
    assert (b.prompt_mask[:, -1] == 1).all()


def test_old_logprobs_equal_the_updates_logprobs_before_any_step(stages):
    b = stages["sampler"].step(stages["batch"])
    stages["model"].train()
    logp = completion_logprobs(stages["model"], b.prompt_ids, b.prompt_mask, b.completion_ids, b.mask).logp
    assert torch.equal(logp.detach(), b.old_logp)


def test_sampler_logprobs_match_an_unpadded_forward(stages):
    """Left padding must not change anything: compare one row against a forward of that row alone."""
    b, model, tok = stages["sampler"].step(stages["batch"]), stages["model"], stages["tok"]
    i = int(b.prompt_mask.sum(-1).argmin())                       # the shortest (most padded) prompt
    n = int(b.lengths[i])
    ids = torch.cat([tok(b.prompts[i], return_tensors="pt").input_ids[0], b.completion_ids[i, :n]])
    with torch.no_grad():
        logits = model(ids[None]).logits[0, -n - 1 : -1]
    ref = torch.log_softmax(logits.double(), -1).gather(-1, ids[-n:, None]).squeeze(-1)
    torch.testing.assert_close(b.old_logp[i, :n].double(), ref, atol=2e-5, rtol=0)


def test_rewarder_and_advantager_fields(stages):
    b = stages["rewarder"].step(stages["sampler"].step(stages["batch"]))
    expected = [stages["task"].reward(c, a).reward for c, a in zip(b.completions, b.answers)]
    assert b.rewards.tolist() == expected and set(b.reward_parts) == {"correct", "format"}
    assert b.correct.tolist() == [r > 0 for r in expected]
    b = stages["advantager"].step(b)
    groups = b.adv.view(P, G)
    assert torch.allclose(groups.sum(-1), torch.zeros(P), atol=1e-5)  # group-centred
    r = b.rewards.view(P, G)
    hand = (r - r.mean(-1, keepdim=True)) / (r.std(-1, keepdim=True) + 1e-6)
    assert torch.allclose(groups, hand)


def test_one_update_per_batch_has_ratio_exactly_one(stages):
    b = stages["advantager"].step(stages["rewarder"].step(stages["sampler"].step(stages["batch"])))
    before = [p.detach().clone() for p in stages["model"].parameters()]
    stats = stages["updater"].step(b)
    assert torch.equal(stats.ratio[b.mask.bool()], torch.ones(int(b.mask.sum())))
    assert stats.clip_low == stats.clip_high == stats.clip_region == 0.0 and stats.num_updates == 1
    changed = any(not torch.equal(p, q) for p, q in zip(before, stages["model"].parameters()))
    assert changed == bool(b.adv.abs().sum() > 0)                     # weights move iff there is signal


def test_several_mini_batches_move_the_ratio_and_clip():
    trainer = rlnb.Trainer.tiny("grpo", task="add", seed=3, prompts_per_step=8, num_generations=4,
                                num_mini_batches=4, num_iterations=2, lr=3e-3, eps_low=0.05, eps_high=0.05)
    rec = trainer.step()
    m = rec.batch.mask.bool()
    assert rec.stats.num_updates == 8
    assert (rec.stats.ratio[m] != 1).any()
    assert rec.metrics["clip_ratio/region_mean"] > 0


def test_trainer_history_metrics_and_timing():
    trainer = rlnb.Trainer.tiny("grpo", task="add", seed=0, prompts_per_step=4, num_generations=4)
    trainer.run(2, progress=False)
    h = trainer.history
    assert [x["step"] for x in h] == [1, 2]
    for key in ["reward", "reward_std", "frac_reward_zero_std", "entropy", "kl", "clip_ratio/low_mean",
                "clip_ratio/high_mean", "clip_ratio/region_mean", "completions/mean_length",
                "timing/sample_s", "timing/reward_s", "timing/advantage_s", "timing/update_s"]:
        assert key in h[-1] and math.isfinite(h[-1][key]), key
    b = trainer.records[-1].batch
    assert h[-1]["reward"] == pytest.approx(float(b.rewards.mean()))
    assert h[-1]["completions/mean_length"] == pytest.approx(float(b.mask.sum(-1).mean()))
    zero = (b.rewards.view(-1, 4).std(-1) == 0).float().mean()
    assert h[-1]["frac_reward_zero_std"] == pytest.approx(float(zero))


def test_same_seed_same_history_other_seed_differs():
    runs = []
    for seed in (0, 0, 1):
        t = rlnb.Trainer.tiny("grpo", task="add", seed=seed, prompts_per_step=4, num_generations=4)
        t.run(2, progress=False)
        runs.append([{k: v for k, v in h.items() if not k.startswith("timing/")} for h in t.history])
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


def test_batch_renders_as_a_table(stages):
    b = stages["advantager"].step(stages["rewarder"].step(stages["sampler"].step(stages["batch"])))
    html = b._repr_html_()
    shown, folded = html.split("<details>")
    assert shown.count("<tr") == min(b.group_size, 12) + 1 and "adv" in shown and b.prompts[0] in shown
    assert folded.count("<tr") == b.B - min(b.group_size, 12) + 1 and f"... {b.B - min(b.group_size, 12)} more rows" in folded
    text = b.table(group=1)
    assert text.splitlines()[0] == f"group 1 of {b.P} (G = {b.group_size})" and b.prompts[b.group_size] in text
    assert len(text.splitlines()) == b.group_size + 2


def test_cli_recipe_flags_parse_tuples_bools_and_optional_numbers():
    from rlnb.cli import build_parser, recipe_overrides

    args = build_parser().parse_args(["train", "--filters", "dynamic_sampling", "overlong", "--kl-target", "0.1",
                                      "--dual-clip-c", "none", "--fp32-lm-head", "true", "--eps-high", "0.28",
                                      "--beta", "0.05"])
    assert recipe_overrides(args) == {"filters": ("dynamic_sampling", "overlong"), "kl_target": 0.1, "dual_clip_c": None,
                                "fp32_lm_head": True, "eps_high": 0.28, "beta": 0.05}
    assert rlnb.recipes.get("grpo", **recipe_overrides(args)).filters == ("dynamic_sampling", "overlong")


def test_batch_table_shows_the_first_group_with_right_and_wrong_answers():
    import pytest
    import torch

    import rlnb

    b = rlnb.Batch.from_rows({"prompt": ["1+1=", "2+2=", "3+3="], "answer": ["2", "4", "6"]}, 2)
    b = b.replace(completions=["2", "3", "5", "4", "6", "9"], correct=torch.tensor([1, 1, 0, 1, 0, 0]).bool(),
                  rewards=torch.tensor([1.0, 1, 0, 1, 0, 0]), adv=torch.tensor([0.0, 0, -0.7071, 0.7071, 0, 0]))
    assert b.signal_group() == 1                      # group 0 all right, group 2 all wrong
    text = b.table()
    assert text.splitlines()[0] == "group 1 of 3 (G = 2)"
    assert text.splitlines()[2].split() == ["2", "2+2=", "5", "0.00", "-0.71"]  # 2-digit numbers, no length yet
    with pytest.raises(ValueError, match="group: expected 0..2"):
        b.table(group=3)
    assert "rgba(" in b._repr_html_() and "#fce8e6" not in b._repr_html_()   # tints that read in the dark theme
