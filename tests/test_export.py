"""The recipe -> TRL mapping as plain data (no ``trl`` needed): every recipe, every field accounted for,
and each conversion checked by hand."""


import pytest
import torch

import rlnb
from rlnb.export import batch_geometry, mapping_table, overlong_reward, text_reward, trl_mapping
from rlnb.export.trl_map import CONVERTED, RULED
from rlnb.recipe import Recipe

# By hand from the papers and TRL 1.16's GRPOTrainer: (expected config fields, unsupported fields,
# differing conventions). Every recipe has the toy budget P=16, G=8 (B=128), 32 new tokens, 10 warm-up steps.
EXPECTED = {
    "reinforce": ({"loss_type": "dr_grpo", "scale_rewards": "group"}, {"advantage", "loss"}, {"warmup_steps"}),
    "ppo": ({"loss_type": "dapo", "beta": 0.0, "steps_per_generation": 2, "per_device_train_batch_size": 64},
            {"critic", "kl_in_reward"}, {"warmup_steps", "num_mini_batches"}),
    "grpo": ({"loss_type": "grpo", "importance_sampling_level": "token", "scale_rewards": "group", "epsilon": 0.2,
              "epsilon_high": 0.2, "beta": 0.0, "mask_truncated_completions": False}, set(), {"eps", "warmup_steps"}),
    "rloo": ({"loss_type": "dr_grpo", "beta": 0.0}, {"advantage", "loss", "kl_in_reward"}, {"warmup_steps"}),
    "dr_grpo": ({"loss_type": "dr_grpo", "scale_rewards": "none", "epsilon": 0.2}, set(), {"warmup_steps"}),
    "dapo": ({"loss_type": "dapo", "scale_rewards": "group", "epsilon": 0.2, "epsilon_high": 0.28,
              "mask_truncated_completions": True, "max_completion_length": 40}, {"max_gen_rounds", "filters"},
             {"eps", "warmup_steps"}),
    "cispo": ({"loss_type": "cispo", "epsilon_high": 5.0, "steps_per_generation": 2, "per_device_train_batch_size": 64},
              set(), {"eps", "warmup_steps", "num_mini_batches"}),
    "gspo": ({"loss_type": "grpo", "importance_sampling_level": "sequence", "epsilon": 3e-4, "epsilon_high": 4e-4,
              "steps_per_generation": 2}, set(), {"eps", "warmup_steps"}),
    "maxrl": ({"loss_type": "dapo", "epsilon": 0.2, "epsilon_high": 0.2}, {"advantage"}, {"warmup_steps"}),
    "dppo": ({"loss_type": "dapo"}, {"loss"}, {"eps", "warmup_steps", "num_mini_batches"}),
    "scalerl": ({"loss_type": "cispo", "scale_rewards": "batch", "epsilon_high": 5.0, "cast_lm_head_to_fp32": True},
                {"pass_rate_threshold", "filters", "aggregation"}, {"eps", "warmup_steps"}),
    "gpg": ({"loss_type": "dapo", "scale_rewards": "group", "beta": 0.0}, {"advantage", "loss"}, {"warmup_steps"}),
    "gdpo": ({"loss_type": "grpo", "multi_objective_aggregation": "normalize_then_sum", "epsilon": 0.2,
              "epsilon_high": 0.2}, set(), {"advantage", "warmup_steps"}),
}
COMMON = {"num_generations": 8, "max_completion_length": 32, "temperature": 1.0, "top_p": 1.0, "learning_rate": 1e-4,
          "warmup_steps": 10, "lr_scheduler_type": "constant_with_warmup", "use_bias_correction_kl": False,
          "num_iterations": 1, "gradient_accumulation_steps": 1}


def test_every_recipe_has_an_expectation_and_the_rule_lists_name_real_knobs():
    assert set(EXPECTED) == set(rlnb.recipes.names())
    knobs = Recipe.knobs()
    assert CONVERTED <= {n for n, k in knobs.items() if k.trl}       # a conversion rule for a TRL field
    assert RULED <= {n for n, k in knobs.items() if not k.trl}       # a gap rule for a knob TRL lacks


# a legal non-default value for each knob the mapping copies or reports from its declaration alone
MOVED = {"num_generations": 4, "temperature": 0.7, "top_p": 0.9, "max_new_tokens": 24, "entropy_coef": 0.01,
         "lr": 3e-4, "warmup_steps": 3, "weight_decay": 0.01, "max_grad_norm": 0.5, "num_iterations": 2,
         "fp32_lm_head": True, "max_gen_rounds": 3, "pass_rate_threshold": 0.9, "topk_logprobs": 4,
         "kl_in_reward": True, "kl_target": 0.1, "beta": 0.1, "gpg_alpha_nonzero": False, "handle_zero_tail": False,
         "singleton_zero": True, "rollout_rs_estimator": "k1", "rollout_rs_reduce": "max", "bypass_mode": True,
         "rollout_bf16": True, "use_bias_correction_kl": True}


def _moved(name: str, k) -> object:
    """A legal non-default value of a knob: MOVED's, else the declaration's ``on`` value or its slider's low
    end (so a new knob needs no entry here)."""
    if name in MOVED:
        return MOVED[name]
    value = k.on if k.on is not None else (10 ** k.slider[0] if k.scale == "log" else k.slider[0])
    assert value != Recipe.__dataclass_fields__[name].default, f"{name}: declare on= or list it in MOVED"
    return value


def test_declared_trl_names_carry_the_value_and_declared_gaps_their_reason():
    knobs = Recipe.knobs()
    direct = {n for n, k in knobs.items() if k.trl and n not in CONVERTED}
    gaps = {n for n, k in knobs.items() if not k.trl and n not in RULED}
    for name in sorted(direct | gaps):
        value = _moved(name, knobs[name])
        acts = knobs[name].acts  # a knob that acts only when the estimator reads an input: an estimator that does
        reads = {"advantage": next(n for n, f in rlnb.algos.ADVANTAGES.items() if acts in rlnb.algos.extra_inputs(f))} \
            if acts not in ("", "ratio") else {}
        r = rlnb.recipes.get("grpo", **{name: value, **reads, **({"beta": 0.1} if name == "kl_target" else {})})
        m = trl_mapping(r)
        if name in direct:
            assert m.kwargs[knobs[name].trl] == value, name
        else:
            assert [g.why for g in m.unsupported if g.field == name] == [knobs[name].no_trl], name


def test_a_knob_that_cannot_act_in_the_recipe_is_no_gap():
    assert "mc_rollouts" not in {g.field for g in trl_mapping(rlnb.recipes.get("grpo", mc_rollouts=8)).unsupported}
    assert "mc_rollouts" in {g.field for g in trl_mapping(rlnb.recipes.get("grpo", advantage="vineppo")).unsupported}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_mapping_of_every_recipe(name):
    fields, unsupported, differences = EXPECTED[name]
    m = trl_mapping(name)
    assert {k: m.kwargs[k] for k in {**COMMON, **fields}} == {**COMMON, **fields}
    assert {g.field for g in m.unsupported} == unsupported
    assert {g.field for g in m.differences} == differences
    assert all(g.why and str(g).startswith(f"{g.field}=") for g in m.unsupported + m.differences)
    assert m.kwargs["per_device_train_batch_size"] * m.kwargs["steps_per_generation"] == 128


def test_rewards_and_their_weights():
    assert trl_mapping("grpo", ).reward_weights == {"correct": 1.0, "format": 0.0}
    assert trl_mapping(rlnb.recipes.get("dapo", format_weight=0.5)).reward_weights == \
        {"correct": 1.0, "format": 0.5, "overlong": 1.0}


def test_batch_geometry_splits_one_step_over_processes_and_accumulation():
    r = rlnb.recipes.get("cispo")                                     # B = 128, 2 optimizer steps per batch
    assert batch_geometry(r, num_processes=4, gradient_accumulation_steps=2) == \
        {"per_device_train_batch_size": 8, "gradient_accumulation_steps": 2, "steps_per_generation": 4}
    with pytest.raises(ValueError, match="num_processes"):
        batch_geometry(r, num_processes=3)
    with pytest.raises(ValueError, match="gradient_accumulation_steps"):
        batch_geometry(r, gradient_accumulation_steps=0)


def test_cispo_cap_conventions():
    assert trl_mapping(rlnb.recipes.get("cispo", eps_high=1.0)).kwargs["epsilon_high"] == 2.0   # 1 + eps_high
    assert trl_mapping(rlnb.recipes.get("cispo", cispo_cap=3.5)).kwargs["epsilon_high"] == 3.5  # absolute
    m = trl_mapping(rlnb.recipes.get("cispo", eps_low=0.5))
    assert [g.field for g in m.unsupported] == ["eps_low"]             # TRL's cispo has no lower bound


def test_dual_clip_maps_to_delta_only_above_the_clip_range():
    assert trl_mapping(rlnb.recipes.get("grpo", dual_clip_c=3.0)).kwargs["delta"] == 3.0
    m = trl_mapping(rlnb.recipes.get("grpo", dual_clip_c=1.1))        # below 1 + eps_high = 1.2
    assert "delta" not in m.kwargs and [g.field for g in m.unsupported] == ["dual_clip_c"]


def test_kl_settings():
    m = trl_mapping(rlnb.recipes.get("grpo", beta=0.04))
    assert (m.kwargs["beta"], m.kwargs["use_bias_correction_kl"], m.unsupported) == (0.04, False, [])
    assert [g.field for g in trl_mapping(rlnb.recipes.get("grpo", beta=0.04, kl_estimator="k1")).unsupported] == \
        ["kl_estimator"]
    assert [g.field for g in trl_mapping(rlnb.recipes.get("grpo", beta=0.04, kl_target=0.1)).unsupported] == \
        ["kl_target"]


def test_entropy_thermostat_and_bonus():
    m = trl_mapping(rlnb.recipes.get("dapo", entropy_coef=0.01, entropy_target=0.3, entropy_coef_delta=0.002))
    assert {k: m.kwargs[k] for k in ("entropy_coef", "use_adaptive_entropy", "entropy_target", "entropy_coef_delta",
                                     "entropy_coef_max", "entropy_coef_min")} == \
        {"entropy_coef": 0.01, "use_adaptive_entropy": True, "entropy_target": 0.3, "entropy_coef_delta": 0.002,
         "entropy_coef_max": 0.05, "entropy_coef_min": 0.0}
    assert "entropy_target" in {g.field for g in m.differences}      # TRL gates the bonus
    # the bonus is TRL's by default under every aggregation (a token mean over the pushed tokens)
    for name in ("dapo", "grpo"):
        gaps = trl_mapping(rlnb.recipes.get(name, entropy_coef=0.01, top_entropy_quantile=0.2))
        assert "entropy_aggregation" not in {g.field for g in gaps.unsupported + gaps.differences}


def test_entropy_bonus_aggregated_like_the_loss_is_not_expressible():
    """verl's rule ('loss-aggregation') differs from TRL's unless the loss is a token mean over every token."""
    verl = dict(entropy_coef=0.01, entropy_aggregation="loss-aggregation")
    gap = [g for g in trl_mapping(rlnb.recipes.get("grpo", **verl)).unsupported if g.field == "entropy_aggregation"]
    assert len(gap) == 1 and "seq-mean-token-mean" in gap[0].why
    masked = trl_mapping(rlnb.recipes.get("dapo", top_entropy_quantile=0.2, **verl)).unsupported
    assert "entropy_aggregation" in {g.field for g in masked}
    for same in (rlnb.recipes.get("dapo", **verl), rlnb.recipes.get("grpo", entropy_aggregation="loss-aggregation")):
        assert "entropy_aggregation" not in {g.field for g in trl_mapping(same).unsupported}  # same number, or no bonus


def test_overlong_filter_with_a_sequence_mean_is_a_difference():
    m = trl_mapping(rlnb.recipes.get("grpo", filters=("overlong",)))
    assert m.kwargs["mask_truncated_completions"] is True and "filters" in {g.field for g in m.differences}


def test_other_losses_and_aggregations():
    sapo = trl_mapping(rlnb.recipes.get("grpo", loss="sapo", tau_pos=1.5, tau_neg=2.0))
    assert (sapo.kwargs["loss_type"], sapo.kwargs["sapo_temperature_pos"], sapo.kwargs["sapo_temperature_neg"]) == \
        ("sapo", 1.5, 2.0)
    luspo = trl_mapping(rlnb.recipes.get("gspo", aggregation="seq-mean-token-sum"))
    assert (luspo.kwargs["loss_type"], luspo.kwargs["importance_sampling_level"]) == ("luspo", "sequence")
    gspo_tok = trl_mapping(rlnb.recipes.get("gspo", aggregation="token-mean"))
    assert [g.field for g in gspo_tok.unsupported] == ["aggregation"]


def test_matched_recipe_follows_trl_where_rlnb_can():
    m = trl_mapping(rlnb.recipes.get("grpo", unbiased=False))
    assert (m.matched.eps, m.matched.unbiased) == (1e-4, True) and {"eps", "unbiased"} <= {g.field for g in m.differences}
    assert trl_mapping("dr_grpo").matched == rlnb.recipes.get("dr_grpo")


def test_single_completion_groups_are_refused():
    with pytest.raises(ValueError, match="num_generations"):
        trl_mapping(rlnb.recipes.get("grpo", num_generations=1))


def test_overlong_reward_counts_tokens_with_eos():
    fn = overlong_reward(max_new_tokens=16, overlong_buffer=4)
    # lengths 10, 14, 16: 0 up to L_max - L_cache = 12, then (12 - |y|) / 4, -1 at L_max
    got = fn(["a", "b", "c"], completion_ids=[[5] * 10, [5] * 14, [5] * 16])
    assert got == [0.0, -0.5, -1.0]


def test_text_reward_reads_chat_completions():
    fn = text_reward(rlnb.tasks.get("add").reward_funcs()["correct"])
    chat = [[{"role": "assistant", "content": "0+9=9;5+3=8;7+8=15>1589"}], [{"role": "assistant", "content": "x"}]]
    assert fn(chat, ["1589", "1589"]) == [1.0, 0.0] and fn.__name__ == "add_correct"
    assert torch.tensor(fn(["0+9=9;5+3=8;7+8=15>1589"], ["1589"])).item() == 1.0


def test_report_and_table_list_every_gap():
    m = trl_mapping("scalerl")
    text = m.report()
    assert text.startswith("GRPOConfig(loss_type='cispo'") and all(str(g) in text for g in m.unsupported + m.differences)
    table = mapping_table().splitlines()
    assert len(table) == 2 + len(rlnb.recipes.names())
    row = next(line for line in table if line.startswith("| `dapo` |"))
    assert "`dapo`" in row and "`max_gen_rounds=3`" in row and "`filters='dynamic_sampling'`" in row


def test_verl_override_values_are_exact_and_short_enough_to_read():
    """Hydra's grammar, exact, and no 1000000000.0 in a printed command (the browser's readability check)."""
    from rlnb.export.verl_map import hydra_value

    cases = [(1e9, "1e+09"), (0.2, "0.2"), (1.0, "1.0"), (1e-6, "1e-06"), (3.0000001, "3.0000001"), (True, "true"),
             (None, "null"), ((1, 0.5), "[1,0.5]")]
    for value, text in cases:
        assert hydra_value(value) == text, value
    assert all(float(hydra_value(v)) == v for v in (1e9, 0.28, 3.0000001, 1e-12))
