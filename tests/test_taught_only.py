"""A chapter shows only what it has taught: ``Lab(metrics=..., recipes=..., scenarios=False)`` restricts the
panels, the recipe dropdown and the scenario row, ``AdvantageExplorer(estimators=...)`` the estimators; bad
choices are refused by name."""

import pytest

from rlnb import Trainer
from rlnb.viz import Lab


def tiny():
    return Trainer.tiny("grpo", prompts_per_step=2, num_generations=4, seed=0)


def shown_metrics(lab) -> set[str]:
    return {m for _, ms in lab.dashboard.panels for m in ms}


def in_widget(lab, w) -> bool:
    stack = [lab.widget]
    while stack:
        x = stack.pop()
        if x is w:
            return True
        stack.extend(getattr(x, "children", ()))
    return False


def test_the_default_lab_shows_every_panel_recipe_and_the_scenarios():
    lab = Lab(tiny(), backend="static")
    assert {"kl", "clip_ratio/low_mean", "frac_reward_zero_std"} <= shown_metrics(lab)
    assert len(lab.controls["recipe"].options) > 3 and in_widget(lab, lab.scenario)
    lab.close()


def test_a_chapter_lab_shows_only_the_metrics_recipes_and_knobs_it_names():
    lab = Lab(tiny(), backend="static", knobs=("lr",), metrics=("reward", "entropy"), recipes=("grpo", "rloo"),
              scenarios=False)
    assert shown_metrics(lab) == {"reward", "entropy"}
    assert list(lab.controls["recipe"].options) == ["grpo", "rloo"] and set(lab.controls) == {"lr", "recipe"}
    assert not in_widget(lab, lab.scenario) and not in_widget(lab, lab.buttons["Fork and fix"])
    lab.step()
    assert len(lab.dashboard.fig.data) >= 2          # it draws
    lab.close()


@pytest.mark.parametrize("recipes", [("grpo", "nope"), "grpo", ()])
def test_bad_recipes_are_refused_by_name_and_leave_the_trainer_free(recipes):
    t = tiny()
    with pytest.raises(ValueError, match="recipes: expected a non-empty list of recipe names"):
        Lab(t, backend="static", recipes=recipes)
    Lab(t, backend="static").close()                  # nothing half-built holds the trainer


def test_the_advantage_explorer_offers_and_draws_only_the_estimators_named():
    from rlnb.viz import AdvantageExplorer

    taught = ("reinforce", "grpo", "dr_grpo", "rloo", "maxrl")
    ex = AdvantageExplorer(estimators=taught, estimator="grpo")
    assert list(ex.controls["estimator"].options) == list(taught)
    odd = {t.meta.removeprefix("odd ") for t in ex.fig.data if str(t.meta or "").startswith("odd ")}
    assert odd == {"grpo", "dr_grpo", "rloo"}, odd    # the odd-one-out panel's lines (and legend): a few taught ones
    assert list(ex.controls["compare"].options) == list(taught)  # and only taught ones can be added,
    assert ex.controls["compare"].rows == len(taught)             # every one in sight, selected or not
    ex.controls["compare"].value = ("reinforce", "maxrl")
    odd = {t.meta.removeprefix("odd ") for t in ex.fig.data if str(t.meta or "").startswith("odd ")}
    assert odd == {"grpo", "reinforce", "maxrl"}, odd
    with pytest.raises(ValueError, match="estimators: expected a non-empty list"):
        AdvantageExplorer(estimators=("grpo", "ppo_gae"))
