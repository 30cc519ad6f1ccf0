"""CreditView and the notebook-09 figures: what they show agrees with rlnb.stages.credit, and the race summary is a mean."""

import pytest
import torch

import rlnb
from rlnb.viz import CreditView, credit_figure, race_figure, race_points


@pytest.fixture(scope="module")
def trained():
    t = rlnb.Trainer.tiny("grpo", prompts_per_step=1, num_generations=2, max_new_tokens=26, seed=0)
    t.step()
    return t


def test_credit_view_shows_the_credit_of_the_chosen_completion_and_k(trained):
    b = trained.records[-1].batch
    view = CreditView(trained.model, trained.tokenizer, b, trained.task, row=1, K=1)
    v = view.values
    assert v["sum of A_t"] == pytest.approx(v["reward"] - v["V(prompt)"], abs=1e-6)
    assert v["continuations"] == int(b.lengths[1])                      # K = 1 per prefix
    heat = view.fig.data[1]
    assert list(heat.y) == ["uniform (batch adv)", "MC per token, K=1"]
    assert heat.z[0][0] == pytest.approx(float(b.adv[1]))               # uniform strip = the batch's advantage
    first = view.estimate(1, 1)["values"].clone()
    view.controls["K"].value = 2
    assert view.values["continuations"] == 2 * int(b.lengths[1]) and view.n_updates == 1
    view.controls["K"].value = 1
    assert torch.equal(view.estimate(1, 1)["values"], first)            # cached: the same estimate again
    with pytest.raises(ValueError, match="K: expected one of"):
        CreditView(trained.model, trained.tokenizer, b, trained.task, K=3)


def test_credit_figure_has_a_value_line_and_one_strip_per_estimate():
    fig = credit_figure(["1", "2", "<eos>"], [0.5, 0.25, 1.0, 1.0], {"a": [0.1, 0.2, 0.3], "b": [0.0, -0.5, 1.0]})
    assert [t.type for t in fig.data] == ["scatter", "heatmap"]
    assert list(fig.data[0].y) == [0.5, 0.25, 1.0, 1.0] and len(fig.data[1].z) == 2
    assert fig.data[1].zmin == -1.0 and fig.data[1].zmax == 1.0          # symmetric around 0


def test_race_points_average_checkpoints_over_seeds():
    from rlnb.studies import RunResult, StudyResult

    run = lambda arm, seed, accs, steps: RunResult(arm, seed, [], [  # noqa: E731
        {"step": steps * i // max(1, len(accs) - 1), "tokens": 10 * i, "greedy/pass@1": a} for i, a in enumerate(accs)])
    result = StudyResult([run("grpo", 0, [0.2, 0.4], 9), run("grpo", 1, [0.2, 0.6], 8),
                          run("vineppo", 0, [0.2, 0.3, 0.9], 2), run("vineppo", 1, [0.2, 0.5], 2)],
                         {"arms": {"grpo": {}, "vineppo": {}}})
    p = race_points(result)
    assert p["grpo"]["mean"].tolist() == pytest.approx([0.2, 0.5]) and p["grpo"]["high"][1] == 0.6
    assert len(p["vineppo"]["mean"]) == 2                              # only checkpoints every seed reached
    assert p["grpo"]["steps"] == [9, 8] and p["grpo"]["tokens"].tolist() == [0.0, 10.0]
    fig = race_figure(result)
    assert len(fig.data) == 4 and "2 seeds" in fig.data[1].name
