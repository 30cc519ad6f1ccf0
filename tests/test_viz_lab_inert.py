"""Knobs that act: a lab control whose knob cannot act in the current setting is disabled with the reason,
and enabled as soon as it can act (issue: eps sliders that did nothing on the default recipe)."""

import itertools
import re

import pytest

from rlnb import Trainer, recipes
from rlnb.algos.resolve import RATIO_IS_ONE, inert_knobs
from rlnb.viz import Lab

CLIP = ("eps_low", "eps_high", "dual_clip_c")


@pytest.mark.parametrize("mu, mb", list(itertools.product([1, 2], [1, 2])))
def test_the_clip_ranges_are_inert_exactly_when_every_update_is_on_policy(mu, mb):
    inert = inert_knobs(recipes.get("grpo", num_iterations=mu, num_mini_batches=mb))
    on_policy = mu == 1 and mb == 1
    for k in CLIP:
        assert (inert.get(k) == RATIO_IS_ONE) is on_policy, (k, mu, mb)
    assert "beta" not in inert and "lr" not in inert              # knobs that always act stay enabled


def test_an_entry_knob_no_chosen_entry_takes_is_inert_and_says_which_entry():
    assert inert_knobs(recipes.get("grpo"))["cispo_cap"] == "the loss 'ppo_clip' does not take cispo_cap"
    assert "cispo_cap" not in inert_knobs(recipes.get("grpo", loss="cispo", num_iterations=2))


def shown(lab) -> set[str]:
    return {n for m in re.finditer(r"data-rlnb-inert='([^']*)'", lab.inert_view.value) for n in m.group(1).split()}


def test_the_lab_disables_the_eps_controls_until_mu_or_mini_batches_can_move_the_ratio():
    t = Trainer.tiny("grpo", seed=0, prompts_per_step=8)
    lab = Lab(t, backend="static")
    try:
        assert lab.controls["eps_low"].disabled and lab.controls["eps_high"].disabled
        assert {"eps_low", "eps_high"} <= shown(lab) and "raise mu" in lab.inert_view.value
        assert not lab.controls["num_iterations"].disabled and not lab.controls["beta"].disabled
        lab.step()
        assert t.history[-1]["clip_ratio/region_mean"] == 0.0          # mu = 1: the ratio is 1, nothing clips
        lab.set("num_iterations", 4)                                    # pending: applies at the next step
        assert not lab.controls["eps_low"].disabled and not ({"eps_low", "eps_high"} & shown(lab))
        clipped = [lab.step().metrics["clip_ratio/region_mean"] for _ in range(3)]
        assert t.history[-1]["hp/num_iterations"] == 4
        assert max(clipped) > 0, clipped                                # the clip leaves 0 within a few steps
        lab.set("num_iterations", 1)
        assert lab.controls["eps_low"].disabled
    finally:
        lab.close()


def test_a_loss_that_reads_another_policys_logp_keeps_the_clip_ranges_enabled_at_mu_1(monkeypatch):
    from types import SimpleNamespace

    from rlnb.algos import resolve

    def off_policy(logp, old_logp, adv, mask, rollout_logp=None, *, eps_low: float = 0.2):  # a stand-in entry
        return logp
    off_policy.extra_inputs = ("rollout_logp",)
    monkeypatch.setitem(resolve.POLICY_LOSSES, "off_policy_stand_in", off_policy)
    recipe = SimpleNamespace(num_iterations=1, num_mini_batches=1, loss="off_policy_stand_in",
                             bypass_mode=False)
    assert resolve.ratio_can_leave_one(recipe)                      # the rollout's log-probs differ from the policy's
    assert not resolve.ratio_can_leave_one(SimpleNamespace(num_iterations=1, num_mini_batches=1, loss="ppo_clip",
                                                           bypass_mode=False))
    assert resolve.ratio_can_leave_one(SimpleNamespace(num_iterations=1, num_mini_batches=1, loss="ppo_clip",
                                                       bypass_mode=True))  # pi_old := mu


def test_raising_mu_while_the_lab_plays_makes_the_clip_fire_on_each_side_within_a_few_steps():
    t = Trainer.tiny("grpo", seed=0, prompts_per_step=8)
    lab = Lab(t, backend="static")
    try:
        metas = [tr.meta for tr in lab.dashboard.fig.data]
        assert "clip_ratio/low_mean" in metas and "clip_ratio/high_mean" in metas  # each side its own curve
        lab.play()
        lab.wait(2)
        lab.set("num_iterations", 4)                                    # while it plays: the next boundary
        assert not lab.controls["eps_low"].disabled
        lab.wait(t.step_count + 2)                                      # the change has applied by then
        changed = lab.loop.changes[-1].step
        lab.wait(changed + 3)
        lab.pause()
        before = [h for h in t.history if h["step"] < changed]
        after = [h for h in t.history if h["step"] >= changed][:4]
        assert all(h["clip_ratio/region_mean"] == 0.0 and h["hp/num_iterations"] == 1 for h in before)
        assert all(h["hp/num_iterations"] == 4 for h in after)
        assert max(h["clip_ratio/region_mean"] for h in after) > 0, [h["clip_ratio/region_mean"] for h in after]
        low = max(h["clip_ratio/low_mean"] for h in after)
        high = max(h["clip_ratio/high_mean"] for h in after)
        assert low > 0 or high > 0, (low, high)
    finally:
        lab.close()
