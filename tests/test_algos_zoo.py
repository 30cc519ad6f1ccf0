"""The zoo as a whole: registry contents, docstrings, hyperparameter names and how bind fills them."""

import inspect

import pytest

from rlnb.algos import (
    ADVANTAGES,
    AGGREGATIONS,
    ENTROPY_BONUSES,
    FILTERS,
    KL_ESTIMATORS,
    POLICY_LOSSES,
    ROLLOUT_CORRECTIONS,
    bind,
    hyper_names,
)
from rlnb.recipe import Recipe

REGISTRIES = {"ADVANTAGES": ADVANTAGES, "POLICY_LOSSES": POLICY_LOSSES, "AGGREGATIONS": AGGREGATIONS,
              "KL_ESTIMATORS": KL_ESTIMATORS, "FILTERS": FILTERS, "ROLLOUT_CORRECTIONS": ROLLOUT_CORRECTIONS,
              "ENTROPY_BONUSES": ENTROPY_BONUSES}

NAMES = {
    "ADVANTAGES": ["batch_norm", "dr_grpo", "gdpo", "gpg", "grpo", "grpo_passk", "maxrl", "opo", "optimal_token_baseline",
                   "reinforce", "reinforce_baseline", "reinforce_plus_plus", "reinforce_plus_plus_baseline", "remax",
                   "rloo", "tir_optimal_token_baseline", "vineppo"],
    "POLICY_LOSSES": ["cispo", "clip_cov", "dppo_kl", "dppo_topk_kl", "dppo_topk_tv", "dppo_tv", "dro", "geo_mean",
                      "gspo", "kl_cov", "pg", "ppo_clip", "sapo", "vespo"],
    "AGGREGATIONS": ["prompt-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm",
                     "token-mean", "token-sum"],
    "KL_ESTIMATORS": ["abs", "abs+", "k1", "k1+", "k2", "k3", "k3+"],
    "FILTERS": ["dynamic_sampling", "overlong", "zero_variance"],
    "ROLLOUT_CORRECTIONS": ["off_policy_mask", "sequence_mask", "sequence_reject", "sequence_truncate", "token_mask",
                            "token_reject", "token_truncate"],
    "ENTROPY_BONUSES": ["loss-aggregation", "pushed-token-mean"],
}

ENTRIES = [(r, n) for r, reg in REGISTRIES.items() for n in sorted(reg)]


@pytest.mark.parametrize("reg", sorted(REGISTRIES))
def test_registry_names(reg):
    assert sorted(REGISTRIES[reg]) == NAMES[reg]


@pytest.mark.parametrize("reg, name", ENTRIES)
def test_every_entry_documents_paper_and_has_a_doctest(reg, name):
    doc = inspect.getdoc(REGISTRIES[reg][name]) or ""
    assert ">>>" in doc, f"{name}: no doctest"
    assert any(k in doc for k in ("arXiv", "Williams 1992", "Schulman 2020")), f"{name}: no paper"


def test_bind_fills_what_the_recipe_sets_and_leaves_the_rest_to_the_entry():
    fn = bind(POLICY_LOSSES["ppo_clip"], Recipe(eps_low=0.2, eps_high=0.28))
    assert fn.keywords == {"eps_low": 0.2, "eps_high": 0.28}           # dual_clip_c: ppo_clip's own None
    assert bind(POLICY_LOSSES["cispo"], Recipe()).keywords == {}        # all three knobs: cispo's own
    agg = bind(AGGREGATIONS["seq-mean-token-sum-norm"], Recipe(max_new_tokens=24))
    assert agg.keywords == {"max_new_tokens": 24}


def test_tensor_inputs_are_not_hyperparameters():
    assert hyper_names(POLICY_LOSSES["dppo_topk_tv"]) == ["dppo_delta", "dppo_cap"]
    assert hyper_names(FILTERS["overlong"]) == []
