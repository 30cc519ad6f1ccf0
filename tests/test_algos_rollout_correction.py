"""The rollout-correction entries by hand: truncated and masked IS weights, rejection, the off-policy sequence
mask, their composition, the importance-corrected KL and VESPO; then the mismatched sampler and bypass mode."""

import math

import pytest
import torch

import rlnb
from rlnb.algos import KL_ESTIMATORS, POLICY_LOSSES, ROLLOUT_CORRECTIONS, importance_corrected_kl
from rlnb.algos.rollout_correction import compose

F64 = torch.float64
R = ROLLOUT_CORRECTIONS


def logs(*rows):
    return torch.tensor(rows, dtype=F64).log()


# rollout mu and trainer pi on two rows of three tokens: ratios [2, 1, .5] and [1.25, .8, 1]
MU = logs([0.2, 0.5, 0.4], [0.4, 0.5, 0.3])
PI = logs([0.4, 0.5, 0.2], [0.5, 0.4, 0.3])
M = torch.ones(2, 3, dtype=F64)
A = torch.tensor([1.0, -1.0], dtype=F64)


def run(name, **kw):
    return R[name](PI, PI, MU, A, M, **kw)


def test_token_is_weights_truncate_or_mask_each_ratio():
    r = torch.tensor([[2.0, 1.0, 0.5], [1.25, 0.8, 1.0]], dtype=F64)
    torch.testing.assert_close(run("token_truncate").is_weight, r)                    # C_max 3: nothing to cut
    torch.testing.assert_close(run("token_truncate", rollout_is_max=1.5, rollout_is_min=0.9).is_weight,
                               torch.tensor([[1.5, 1.0, 0.9], [1.25, 0.9, 1.0]], dtype=F64))
    torch.testing.assert_close(run("token_mask", rollout_is_max=1.5, rollout_is_min=0.9).is_weight,
                               torch.tensor([[0.0, 1.0, 0.0], [1.25, 0.0, 1.0]], dtype=F64))
    c = run("token_truncate", rollout_is_max=2.0)                                      # verl: rollout_is="token"
    assert torch.equal(c.gate, M) and torch.equal(c.keep, M) and c.is_weight.max() == 2.0


def test_sequence_is_weights_use_the_product_of_ratios():
    # row ratios: 2 * 1 * .5 = 1 and 1.25 * .8 * 1 = 1; a second batch where row 0 is 2 * 2 * 1 = 4
    torch.testing.assert_close(run("sequence_truncate").is_weight, torch.ones(2, 3, dtype=F64))
    pi = logs([0.4, 0.5, 0.8], [0.5, 0.4, 0.3])
    w = R["sequence_truncate"](pi, pi, MU, A, M, rollout_is_max=3.0).is_weight
    torch.testing.assert_close(w, torch.tensor([[3.0] * 3, [1.0] * 3], dtype=F64))
    w = R["sequence_mask"](pi, pi, MU, A, M, rollout_is_max=3.0).is_weight
    torch.testing.assert_close(w, torch.tensor([[0.0] * 3, [1.0] * 3], dtype=F64))


def test_padding_gets_weight_zero_and_counts_nowhere():
    m = torch.tensor([[1, 1, 0], [1, 0, 0]], dtype=F64)
    c = R["sequence_truncate"](PI, PI, MU, A, m)
    torch.testing.assert_close(c.is_weight, torch.tensor([[2.0, 2.0, 0.0], [1.25, 0.0, 0.0]], dtype=F64))


def test_token_rejection_by_k1_k2_k3():
    # log mu - log pi per token: [-log 2, 0, log 2], [-log 1.25, log 1.25, 0]
    k1 = run("token_reject", rollout_rs_estimator="k1", rollout_rs_threshold=1.5).keep     # |log r| <= log 1.5
    assert k1.tolist() == [[0.0, 1.0, 0.0], [1.0, 1.0, 1.0]]
    k2 = run("token_reject", rollout_rs_estimator="k2", rollout_rs_threshold=0.1).keep     # (log 2)^2 / 2 = .24
    assert k2.tolist() == [[0.0, 1.0, 0.0], [1.0, 1.0, 1.0]]
    # k3 = r - 1 - log r: r = 2 -> .307, r = .5 -> .193, r = 1.25 -> .0269, r = .8 -> .0231
    k3 = run("token_reject", rollout_rs_threshold=0.025).keep
    assert k3.tolist() == [[0.0, 1.0, 0.0], [0.0, 1.0, 1.0]]
    c = run("token_reject", rollout_rs_threshold=0.025)
    assert torch.equal(c.is_weight, M) and torch.equal(c.gate, M)


def test_sequence_rejection_sum_mean_max():
    k3 = torch.tensor([[2 - 1 - math.log(2), 0, 0.5 - 1 + math.log(2)],
                       [1.25 - 1 - math.log(1.25), 0.8 - 1 - math.log(0.8), 0]])
    for reduce, stat in (("sum", k3.sum(1)), ("mean", k3.mean(1)), ("max", k3.amax(1))):
        C = float(stat.mean())                                         # between the two rows' values
        keep = run("sequence_reject", rollout_rs_threshold=C, rollout_rs_reduce=reduce).keep
        assert keep[:, 0].tolist() == (stat <= C).double().tolist() == [0.0, 1.0], reduce
        assert (keep == keep[:, :1]).all()                             # whole rows
    with pytest.raises(ValueError, match="^rollout_rs_reduce: "):
        run("sequence_reject", rollout_rs_threshold=1.0, rollout_rs_reduce="max", rollout_rs_estimator="k1")


def test_off_policy_mask_drops_only_negative_rows_that_drifted():
    # mean (log mu - log pi): row 0 = 0, row 1 = (-log 1.25 + log 1.25 + 0) / 3 = 0; use a drifted pi
    pi = logs([0.1, 0.25, 0.2], [0.2, 0.25, 0.15])                   # both rows halved: KL = log 2
    for adv, want in ((torch.tensor([1.0, -1.0]), [1.0, 0.0]), (torch.tensor([-1.0, 1.0]), [0.0, 1.0])):
        gate = R["off_policy_mask"](pi, pi, MU, adv.double(), M, off_policy_mask_threshold=0.5).gate
        assert gate[:, 0].tolist() == want and (gate == gate[:, :1]).all()
    kept = R["off_policy_mask"](pi, pi, MU, torch.tensor([-1.0, -1.0], dtype=F64), M, off_policy_mask_threshold=0.7)
    assert kept.gate.eq(1).all()                                       # log 2 = .69 <= .7


def test_compose_multiplies_and_none_is_identity():
    c = compose([], PI, PI, MU, A, M)
    assert all(torch.equal(x, torch.ones_like(M)) for x in c)
    from functools import partial
    fns = [partial(R["token_truncate"], rollout_is_max=1.5), partial(R["token_reject"], rollout_rs_threshold=0.025)]
    c = compose(fns, PI, PI, MU, A, M)
    assert c.is_weight[0].tolist() == [1.5, 1.0, 0.5] and c.keep.tolist() == [[0, 1, 0], [0, 1, 1]]


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="^rollout_logp: "):
        R["token_truncate"](PI, PI, None, A, M)
    with pytest.raises(ValueError, match="^rollout_is_min: expected at most"):
        run("token_mask", rollout_is_min=2.0, rollout_is_max=1.0)
    with pytest.raises(ValueError, match="^rollout_is_max: expected a positive"):
        run("token_mask", rollout_is_max=0.0)
    with pytest.raises(ValueError, match="^rollout_rs_threshold: a rejection entry needs"):
        run("token_reject")
    with pytest.raises(ValueError, match="^off_policy_mask_threshold: "):
        run("off_policy_mask")
    with pytest.raises(ValueError, match="^rollout_logp: expected shape"):
        R["token_truncate"](PI, PI, MU[:, :2], A, M)
    with pytest.raises(ValueError, match="^off_policy_mask_threshold: "):
        rlnb.recipes.get("grpo", rollout_correction="off_policy_mask")


def test_importance_corrected_kl_value_and_gradient():
    """k3 rho with d = logp - ref: at rho = 1 the value is k3, the gradient k3' + k3 (the ratio's own)."""
    ref = torch.tensor([[-1.0]], dtype=F64)
    logp = torch.tensor([[-0.5]], dtype=F64, requires_grad=True)
    kl = KL_ESTIMATORS["k3"](logp, ref)
    y = importance_corrected_kl(kl, logp, logp.detach())
    (g,) = torch.autograd.grad(y.sum(), logp)
    k3 = math.exp(-0.5) + 0.5 - 1
    assert y.item() == pytest.approx(k3) and g.item() == pytest.approx((1 - math.exp(-0.5)) + k3)


def test_vespo_by_hand():
    one = torch.ones(1, 1, dtype=F64)
    lp = torch.tensor([[math.log(0.5)]], dtype=F64)
    on = POLICY_LOSSES["vespo"](lp, lp, torch.tensor([1.0], dtype=F64), one)
    assert on.weight.item() == pytest.approx(1.0)                      # phi(1) = 1: REINFORCE on-policy
    # w = 2 with A < 0: phi = e^2 2^3 e^-4 = 8 e^-2
    out = POLICY_LOSSES["vespo"](lp, lp - math.log(2), torch.tensor([-1.0], dtype=F64), one)
    assert out.weight.item() == pytest.approx(-8 * math.exp(-2)) and out.ratio.item() == pytest.approx(2.0)
    # an IS weight of 1/2 folds into w: w = 2 * 1/2 = 1, phi = 1
    folded = POLICY_LOSSES["vespo"](lp, lp - math.log(2), torch.tensor([-1.0], dtype=F64), one, 0.5 * one)
    assert folded.weight.item() == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="^is_weight: expected shape"):
        POLICY_LOSSES["vespo"](lp, lp, torch.tensor([1.0], dtype=F64), one, torch.ones(1, 2))


# --- the mismatched sampler and bypass mode --------------------------------------------------------------
TINY = dict(prompts_per_step=2, num_generations=4, max_new_tokens=8)


def test_a_mismatched_sampler_records_its_own_log_probs():
    gaps = {}
    for kw in ({}, {"rollout_bf16": True}, {"rollout_temperature": 1.5}):
        t = rlnb.Trainer.tiny("grpo", seed=0, **kw, **TINY)
        batch = t.sampler.step(t.next_prompts())
        m = batch.mask.bool()
        gaps[str(kw)] = float((batch.old_logp - batch.rollout_logp).abs()[m].mean())
    same, bf16, temp = gaps.values()
    assert same < 1e-4 < bf16 < temp                                   # rounding < bf16 < another temperature


def test_bypass_mode_puts_the_mismatch_in_the_ratio_and_the_weights():
    t = rlnb.Trainer.tiny("grpo", seed=0, rollout_temperature=1.5, bypass_mode=True, **TINY)
    assert t.sampler.recompute_old_logp                                # only the step itself skips the forward
    rec = t.step()
    ratio, m = rec.stats.ratio, rec.batch.mask.bool()
    assert (ratio[m] - 1).abs().max() > 0.1                            # pi / mu leaves 1 on the first update
    plain = rlnb.Trainer.tiny("grpo", seed=0, rollout_temperature=1.5, **TINY).step()
    assert (plain.stats.ratio[m] - 1).abs().max() < 1e-5               # pi / pi_old does not see it
    assert "ratio" not in rlnb.algos.resolve.inert_knobs(t.recipe).get("eps_low", "")


def test_rejection_leaves_the_denominators_and_a_gate_does_not():
    t = rlnb.Trainer.tiny("grpo", seed=0, rollout_temperature=1.5, rollout_correction="token_reject",
                          rollout_rs_threshold=0.05, **TINY)
    rec = t.step()
    assert 0 < rec.metrics["rollout_corr/rejected_fraction"] < 1
    assert rec.metrics["sampling/importance_sampling_ratio/mean"] == 1.0  # no IS entry: weights all 1


def test_token_baseline_path_weights_scale_by_the_squared_is_weights():
    """verl's rollout_is_weights on the optimal token baseline: w_t -> rho_bar^2 w_t. Two rows, w = 1/2 each,
    rewards 1 and 0; weights 2 and 1 at the single token: B = (4 * .5 * 1) / (4 * .5 + .5) = 0.8."""
    half = torch.full((2, 1), 0.5, dtype=F64)
    r, m = torch.tensor([1.0, 0.0], dtype=F64), torch.ones(2, 1, dtype=F64)
    for name in ("optimal_token_baseline", "tir_optimal_token_baseline"):
        plain = rlnb.algos.ADVANTAGES[name](r, 2, half.log(), half, m)
        torch.testing.assert_close(plain[:, 0], torch.tensor([0.5, -0.5], dtype=F64))
        w = torch.tensor([[2.0], [1.0]], dtype=F64)
        adv = rlnb.algos.ADVANTAGES[name](r, 2, half.log(), half, m, w)
        torch.testing.assert_close(adv[:, 0], torch.tensor([0.2, -0.8], dtype=F64))


def test_the_advantager_hands_the_corrections_is_weights_to_the_token_baseline():
    t = rlnb.Trainer.tiny("grpo", seed=0, advantage="optimal_token_baseline", rollout_temperature=1.5,
                          rollout_correction="token_truncate", rollout_is_max=1.5, **TINY)
    batch = t.rewarder.step(t.sampler.step(t.next_prompts()))
    w = t.advantager.inputs(batch)["rollout_is_weights"]
    assert w is not None and w.max() <= 1.5 and (w[batch.mask.bool()] != 1).any()
    plain = rlnb.Trainer.tiny("grpo", seed=0, advantage="optimal_token_baseline", **TINY).advantager
    assert plain.inputs(batch)["rollout_is_weights"] is None


def test_the_dashboard_shows_the_mismatch_when_the_sampler_differs():
    from rlnb.viz.live.dashboard import MISMATCH_PANEL, Dashboard

    t = rlnb.Trainer.tiny("grpo", seed=0, rollout_temperature=1.3, rollout_correction="token_truncate", **TINY)
    dash = Dashboard(t, backend="static")
    t.run(1, callbacks=[dash], progress=False)
    assert dash.panels[-1] == MISMATCH_PANEL
    shown = {tr.meta: tr.y for tr in dash.fig.data if tr.meta in MISMATCH_PANEL[1]}
    assert set(shown) == set(MISMATCH_PANEL[1]) and shown["sampling/sampling_logp_difference/mean"][-1] > 0.01
    assert MISMATCH_PANEL not in Dashboard(rlnb.Trainer.tiny("grpo", **TINY), backend="static").panels
