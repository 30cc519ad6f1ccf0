"""Rows whose gradient is exactly zero run their forward without a graph (rlnb.stages.live_rows): checked against
``ForwardOptions(backward="all")``, a graph for every row, on fixed batches; and each loss's declaration
(``vanishes_at_zero_adv``) against its own gradient."""

import pytest
import torch

import rlnb
from rlnb.algos.losses import POLICY_LOSSES
from rlnb.algos.registry import extra_inputs, vanishes_at_zero_adv
from rlnb.core.forward_options import ForwardOptions, using
from rlnb.stages import live_rows
from rlnb.stages.update import loss_mask
from tests.test_row_split import loss_and_grads

SMALL = dict(prompts_per_step=4, num_generations=4, max_new_tokens=16)
# losses whose gradient can be nonzero where A = 0: a penalty on the log-ratio itself
NOT_DECLARED = {"kl_cov": dict(kl_cov_ratio=0.5), "dro": dict(dro_beta=1.0)}


def _loss_inputs(name, seed, spread=0.3):
    g = torch.Generator().manual_seed(seed)
    B, T, K = 4, 6, 3
    logp = (torch.randn(B, T, generator=g) * 0.5 - 1).requires_grad_()
    old = logp.detach() + torch.randn(B, T, generator=g) * spread        # ratios away from 1: clipping can fire
    mask = torch.ones(B, T)
    mask[1, 4:] = 0
    extra = {}
    for x in extra_inputs(POLICY_LOSSES[name]):
        extra[x] = torch.randn(B, T, K, generator=g) - 2
    return logp, old, mask, extra


@pytest.mark.parametrize("name", sorted(set(POLICY_LOSSES) - set(NOT_DECLARED)))
@pytest.mark.parametrize("token_level", [False, True])
def test_declared_losses_give_rows_with_zero_advantage_exactly_zero_gradient(name, token_level):
    fn = POLICY_LOSSES[name]
    assert vanishes_at_zero_adv(fn), f"{name}: declare vanishes_at_zero_adv, or list it in NOT_DECLARED"
    for seed, spread in enumerate([0.05, 0.3, 0.6]):
        logp, old, mask, extra = _loss_inputs(name, seed, spread)
        adv = torch.tensor([0.0, 1.3, 0.0, -0.7])
        if token_level:
            adv = adv[:, None] * torch.linspace(0.5, 1.5, 6)                # (B, T), rows 0 and 2 all zero
        out = fn(logp, old, adv, mask, **extra)
        (g,) = torch.autograd.grad(out.loss.sum(), logp)
        assert torch.equal(g[[0, 2]], torch.zeros(2, 6))
        if spread < 0.1:                                                # near the rollout policy nothing is clipped:
            assert bool((g[[1, 3]] != 0).any(-1).all())                 # the other rows do move the weights


@pytest.mark.parametrize("name", sorted(NOT_DECLARED))
def test_undeclared_losses_do_reach_rows_with_zero_advantage(name):
    fn = POLICY_LOSSES[name]
    assert not vanishes_at_zero_adv(fn)
    logp, old, mask, _ = _loss_inputs(name, 0)
    adv = torch.tensor([2.0, 2.0, 0.0, 0.0])                             # the zero rows' covariance is large
    out = fn(logp, old, adv, mask, **NOT_DECLARED[name])
    (g,) = torch.autograd.grad(out.loss.sum(), logp)
    assert bool((g[[2, 3]] != 0).any())


def staged(trainer, adv):
    b = trainer.advantager.step(trainer.rewarder.step(trainer.sampler.step(trainer.next_prompts())))
    return b.replace(adv=adv)


GROUPS_SILENT = torch.tensor([0.0] * 4 + [-1.2, 0.4, 0.9, -0.1] + [0.0] * 4 + [0.5, -0.5, 1.0, -1.0])


@pytest.mark.parametrize("rows", ["split", "whole"])
@pytest.mark.parametrize("recipe", ["grpo", "dr_grpo", "gspo"])
def test_silent_rows_skip_the_backward_with_the_same_loss_and_gradients(two_threads, rows, recipe):
    t = rlnb.Trainer.tiny(recipe, **SMALL)
    batch = staged(t, GROUPS_SILENT)
    t.model.train()
    ref, g_ref = loss_and_grads(t, batch, rows=rows, backward="all")
    got, g_got = loss_and_grads(t, batch, rows=rows, backward="needed")
    assert live_rows.live(t.updater, batch, loss_mask(batch)).tolist() == [False] * 4 + [True] * 4 + [False] * 4 + [True] * 4
    if rows == "split":                                                 # the parts hold the live rows only
        assert [p.logp.shape[0] for p in got.parts] == [4, 4] and [p.logp.shape[0] for p in ref.parts] == [8, 8]
        assert all(p.logp.requires_grad for p in got.parts)
    torch.testing.assert_close(got.total, ref.total, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(got.old_logp, ref.old_logp, rtol=1e-5, atol=1e-6)   # batch order kept
    torch.testing.assert_close(got.entropy, ref.entropy, rtol=1e-5, atol=1e-5)
    assert all(g is not None for g in g_ref) and sum(float(g.abs().sum()) for g in g_ref) > 0
    for a, b in zip(g_got, g_ref):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)


def test_a_filtered_row_is_silent_and_a_token_level_advantage_counts_per_token(two_threads):
    t = rlnb.Trainer.tiny("grpo", **SMALL)
    batch = staged(t, torch.ones(16))
    keep = torch.ones(16, dtype=torch.bool)
    keep[:4] = False
    adv = torch.ones(16, batch.mask.shape[1])
    adv[4:8] = 0.0
    adv[8, -1] = 0.0                                                     # one zero token: the row still moves
    got = live_rows.live(t.updater, batch.replace(keep=keep, adv=adv), loss_mask(batch.replace(keep=keep)))
    assert got.tolist() == [False] * 8 + [True] * 8


@pytest.mark.parametrize("change", ["beta", "entropy_coef", "loss", "all_live", "none_live", "option", "no_grad"])
def test_every_row_keeps_its_graph_where_another_term_reaches_it(change):
    overrides = {"beta": dict(beta=0.04), "entropy_coef": dict(entropy_coef=0.01),
                 "loss": dict(loss="dro", dro_beta=1.0)}.get(change, {})
    t = rlnb.Trainer.tiny("grpo", **SMALL, **overrides)
    adv = {"all_live": torch.ones(16), "none_live": torch.zeros(16)}.get(change, GROUPS_SILENT)
    batch = staged(t, adv)
    options = ForwardOptions(backward="all") if change == "option" else ForwardOptions()
    with using(options), torch.set_grad_enabled(change != "no_grad"):
        assert live_rows.live(t.updater, batch, loss_mask(batch)) is None
    if change in ("option", "no_grad"):                                  # the mutation check: it does apply here
        assert live_rows.live(t.updater, batch, loss_mask(batch)) is not None


def test_a_step_with_silent_rows_moves_the_weights_as_the_full_backward(two_threads):
    runs = {}
    for backward in ("needed", "all"):
        t = rlnb.Trainer.tiny("grpo", **SMALL)
        batch = staged(t, GROUPS_SILENT)
        with using(backward=backward):
            stats = t.updater.step(batch)
        runs[backward] = (stats, [p.detach().clone() for p in t.model.parameters()])
    (s_need, w_need), (s_all, w_all) = runs["needed"], runs["all"]
    assert s_need.grad_norm == pytest.approx(s_all.grad_norm, rel=1e-5) and s_all.grad_norm > 0
    for a, b in zip(w_need, w_all):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


def test_backward_is_a_forward_option_with_a_clear_error():
    assert ForwardOptions().backward == "needed"
    with pytest.raises(ValueError, match=r"backward: expected one of \('needed', 'all'\)"):
        ForwardOptions(backward="some")
