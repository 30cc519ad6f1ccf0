"""The study runner on tiny runs, the summary statistics on hand-made histories, and the probes."""

import math

import pytest
import torch

import rlnb
from rlnb import studies
from rlnb.studies import RunResult, Stat, StudyResult, run_study
from rlnb.studies.probes import kl_to_reference, predicted_zero_std_share, zero_std_share

TINY = dict(task="countdown", steps=1, prompts_per_step=2, num_generations=2, progress=False)
VOLATILE = ("timing/", "wall_s")  # wall-clock entries differ between identical runs


def stable(history):
    return [{k: v for k, v in h.items() if not k.startswith(VOLATILE)} for h in history]


@pytest.fixture(scope="module")
def tiny_study():
    arms = {"base": {}, "fast": {"lr": 1e-3, "entropy_coef": 0.1}}  # the bonus moves the model even without signal
    return run_study(arms, seeds=[3], eval_n=4, eval_sampled_n=2, eval_k=2, kl_to_init=True, **TINY)


def test_run_study_structure(tiny_study):
    res = tiny_study
    assert res.arms == ["base", "fast"] and res.seeds == [3] and len(res.runs) == 2
    for run in res.runs:
        assert len(run.history) == 1 and run.history[0]["step"] == 1
        assert run.history[0]["samples"] == 2 * 2                     # P * G completions in one step
        assert [e["step"] for e in run.evals] == [0, 1]               # step 0 and the end
        assert set(run.evals[0]) >= {"greedy/pass@1", "sampled/pass@1", "sampled/pass@2", "kl_to_init"}
        assert run.evals[0]["kl_to_init"] == 0.0 and run.evals[1]["kl_to_init"] >= 0.0
        assert run.wall_s > 0
    # same seed, different arms: the first batch is sampled before any update, so it is the same
    base, fast = (res.run(a, 3).history[0] for a in ("base", "fast"))
    assert base["reward"] == fast["reward"] and base["completions/mean_length"] == fast["completions/mean_length"]
    assert base["learning_rate"] != fast["learning_rate"]
    assert res.run("fast", 3).evals[1]["kl_to_init"] > 0.0


def test_identical_seeds_give_identical_results(tiny_study):
    again = run_study({"base": {}}, seeds=[3], eval_n=4, eval_sampled_n=2, eval_k=2, kl_to_init=True, **TINY)
    first = tiny_study.run("base", 3)
    assert stable(again.runs[0].history) == stable(first.history)
    assert stable(again.runs[0].evals) == stable(first.evals)              # evals record the training time too


def test_match_samples_counts_every_generation_round():
    res = run_study({"ds": {"filters": ("dynamic_sampling",), "max_gen_rounds": 3}}, seeds=[0], match_samples=True,
                    **{**TINY, "steps": 2})
    hist = res.runs[0].history
    rounds = [h.get("gen_rounds", 1) for h in hist]
    assert [h["samples"] for h in hist] == [4 * sum(rounds[: i + 1]) for i in range(len(hist))]
    assert hist[-1]["samples"] >= 2 * 4 and (len(hist) == 1 or hist[-2]["samples"] < 2 * 4)
    for h in hist:  # the update holds at most P groups, and with dynamic sampling only groups with signal
        assert h["groups"] <= 2 and h["groups_with_signal"] <= h["groups"]
        assert h["frac_reward_zero_std"] == 0.0 or h["groups_with_signal"] == 0


def test_run_study_rejects_bad_input():
    with pytest.raises(ValueError, match="arms"):
        run_study({}, seeds=[0], **TINY)
    with pytest.raises(ValueError, match="arms"):
        run_study({"a": 1}, seeds=[0], **TINY)
    with pytest.raises(ValueError, match="seeds"):
        run_study({"a": {}}, seeds=[], **TINY)
    with pytest.raises(ValueError, match="steps"):
        run_study({"a": {}}, seeds=[0], **{**TINY, "steps": 0})
    with pytest.raises(TypeError, match="no field"):
        run_study({"a": {"eps_hihg": 0.3}}, seeds=[0], **TINY)


# --- summary statistics on hand-made histories ------------------------------------------------
def hand_result() -> StudyResult:
    def run(arm, seed, ent, wrong, greedy):
        hist = [{"step": i + 1, "samples": 8 * (i + 1), "entropy": e, "completions/mean_length_wrong": w}
                for i, (e, w) in enumerate(zip(ent, wrong))]
        evals = [{"step": 0, "samples": 0, "greedy/pass@1": greedy[0]}, {"step": 4, "samples": 32, "greedy/pass@1": greedy[1]}]
        return RunResult(arm, seed, hist, evals)

    runs = [run("a", 0, [1.0, 0.8, 0.6, 0.4], [5.0, None, 7.0, 9.0], [0.2, 0.5]),
            run("a", 1, [1.0, 0.9, 0.7, 0.5], [4.0, 6.0, None, 8.0], [0.2, 0.3]),
            run("b", 0, [1.0, 1.0, 0.9, 0.9], [5.0, 5.0, 5.0, 5.0], [0.2, 0.4]),
            run("b", 1, [1.0, 0.9, 0.9, 0.8], [4.0, 4.0, 4.0, 4.0], [0.2, 0.2])]
    return StudyResult(runs, {"name": "hand", "window": 2})


def test_summary_by_hand():
    res = hand_result()
    # final:entropy with window 2: seed 0 (0.6 + 0.4)/2 = 0.5, seed 1 (0.7 + 0.5)/2 = 0.6
    s = res.value("a", "final:entropy")
    assert s.values == pytest.approx((0.5, 0.6))
    assert s.mean == pytest.approx(0.55) and s.std == pytest.approx(math.sqrt(2 * 0.05**2)) and (s.min, s.max) == (0.5, 0.6)
    # change:entropy: 0.5 - 0.9 = -0.4 and 0.6 - 0.95 = -0.35
    assert res.value("a", "change:entropy").values == pytest.approx((-0.4, -0.35))
    # None entries are skipped: seed 0 wrong lengths [5, 7, 9] -> start (5+7)/2 = 6, final (7+9)/2 = 8
    assert res.value("a", "start:completions/mean_length_wrong").values == pytest.approx((6.0, 5.0))
    assert res.value("a", "final:completions/mean_length_wrong").values == pytest.approx((8.0, 7.0))
    # evaluations reduce with window 1: last minus first
    assert res.value("a", "change:eval/greedy/pass@1").values == pytest.approx((0.3, 0.1))
    assert res.value("b", "max:entropy").values == (1.0, 1.0) and res.value("b", "min:entropy").values == (0.9, 0.8)
    assert res.value("a", "mean:entropy").values == pytest.approx((0.7, 0.775))
    # paired differences a - b per seed: final entropy (0.5 - 0.9, 0.6 - 0.85)
    d = res.diff("a", "b", "final:entropy")
    assert d.values == pytest.approx((-0.4, -0.25)) and d.all_below(0) and not d.all_above(0)
    table = res.summary(["final:entropy", "change:eval/greedy/pass@1"])
    assert table["b", "final:entropy"].values == pytest.approx((0.9, 0.85))
    assert "| a | 0.550 ± 0.071 [0.500, 0.600] |" in table.to_markdown()


def test_summary_rejects_bad_specs():
    res = hand_result()
    with pytest.raises(ValueError, match="spec"):
        res.value("a", "entropy")
    with pytest.raises(ValueError, match="reducer"):
        res.value("a", "last:entropy")
    with pytest.raises(KeyError, match="arm"):
        res.value("zzz", "final:entropy")


def test_stat_of_one_seed_has_zero_spread():
    assert Stat((0.3,)).std == 0.0 and Stat((0.3,)).mean == 0.3


def test_curves_by_hand():
    c = hand_result().curves("entropy", x="samples")
    assert c["a"]["x"] == [8.0, 16.0, 24.0, 32.0]
    assert c["a"]["mean"] == pytest.approx([1.0, 0.85, 0.65, 0.45])
    assert c["a"]["std"] == pytest.approx([0.0, math.sqrt(2 * 0.05**2)] + [math.sqrt(2 * 0.05**2)] * 2)
    # points where any seed lacks the metric are left out: steps 2 and 3 for wrong lengths of arm a
    w = hand_result().curves("completions/mean_length_wrong")
    assert w["a"]["x"] == [1.0, 4.0] and w["a"]["mean"] == pytest.approx([4.5, 8.5])
    s = hand_result().curves("entropy", smooth=2)
    assert s["b"]["per_seed"][0] == pytest.approx([1.0, 1.0, 0.95, 0.9])
    with pytest.raises(ValueError, match="x"):
        hand_result().curves("entropy", x="prompts")           # tokens is an x now (token budgets)


def test_json_round_trip_and_merge(tmp_path):
    res = hand_result()
    res.to_json(tmp_path / "r.json")
    back = StudyResult.from_json(tmp_path / "r.json")
    assert StudyResult.from_json(res.to_json()).config == res.config
    res.to_json(tmp_path / "r.json.gz")
    assert StudyResult.from_json(tmp_path / "r.json.gz").runs[3].history == res.runs[3].history
    rounded = StudyResult.from_json(res.to_json(digits=1))
    assert rounded.run("a", 1).history[1]["entropy"] == 0.9 and rounded.run("a", 0).history[2]["entropy"] == 0.6
    assert [(r.arm, r.seed, r.history, r.evals) for r in back.runs] == [(r.arm, r.seed, r.history, r.evals) for r in res.runs]
    assert back.config == res.config
    a = StudyResult([r for r in res.runs if r.arm == "a"], {"name": "x", "arms": {"a": {}}, "seeds": [0, 1]})
    b = StudyResult([r for r in res.runs if r.arm == "b"], {"name": "x", "arms": {"b": {}}, "seeds": [0, 1]})
    m = StudyResult.merge(a, b)
    assert m.arms == ["a", "b"] and m.config["arms"] == {"a": {}, "b": {}} and len(m.runs) == 4


# --- presets ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", studies.names())
def test_presets_are_valid_recipes_in_both_sizes(name):
    for smoke in (True, False):
        st = studies.get(name, smoke=smoke)
        assert st.smoke is smoke and st.arms
        common = {k: v for k, v in st.settings.items() if k in rlnb.Recipe.field_docs()}
        for over in map(dict, st.arms.values()):
            rlnb.recipes.get(over.pop("recipe", "grpo"), **{**common, **over})   # unknown fields would raise
        if smoke and name != "group_size":
            assert st.settings["prompts_per_step"] == 4 and st.settings["num_generations"] == 4
            assert len(st.settings["seeds"]) <= 2 and st.settings.get("steps", 0) <= 4
            assert ("steps" in st.settings) != ("tokens" in st.settings)      # one budget
        if not smoke and name not in ("group_size", "zoo_race"):
            assert tuple(st.settings["seeds"]) == (0, 1, 2)


def test_preset_lookup_and_smoke_from_environment(monkeypatch):
    with pytest.raises(KeyError, match="entropy_collapse"):
        studies.get("entropy-colapse")
    monkeypatch.setenv("RLNB_SMOKE", "1")
    assert studies.entropy_collapse().smoke is True
    monkeypatch.setenv("RLNB_SMOKE", "0")
    assert studies.entropy_collapse().smoke is False


# --- probes -----------------------------------------------------------------------------------
def test_kl_to_reference_matches_torch_distributions(default_model):
    model, tok = default_model
    other = rlnb.load_default()[0]
    with torch.no_grad():
        for p in other.parameters():
            p.add_(0.02 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    prompt = tok("[3 7 25]>46:", return_tensors="pt").input_ids                    # (1, Tp) one row: no padding
    completion = tok("25+3*7", return_tensors="pt").input_ids[:, 1:]               # drop BOS
    completion = torch.cat([completion, torch.tensor([[tok.eos_token_id]])], 1)   # (1, T)
    batch = rlnb.Batch.from_rows({"prompt": ["x"], "answer": ["y"]}, 1).replace(
        prompt_ids=prompt, prompt_mask=torch.ones_like(prompt), completion_ids=completion,
        mask=torch.ones(completion.shape))
    assert kl_to_reference(model, model, batch) == 0.0
    ids = torch.cat([prompt, completion], 1)
    T = completion.shape[1]
    with torch.no_grad():
        lp, lq = (m(ids).logits[0, -T - 1 : -1].double() for m in (other, model))
    oracle = torch.distributions.kl_divergence(torch.distributions.Categorical(logits=lp),
                                               torch.distributions.Categorical(logits=lq)).mean()
    assert kl_to_reference(other, model, batch) == pytest.approx(float(oracle), rel=1e-6)


def test_zero_std_share_matches_its_prediction_on_bernoulli_draws():
    g = torch.Generator().manual_seed(0)
    p = torch.rand(400, 1, generator=g)
    correct = torch.rand(400, 64, generator=g) < p                                 # (N, M)
    for G in (2, 4, 8):
        assert zero_std_share(correct, G) == pytest.approx(predicted_zero_std_share(p.flatten(), G), abs=0.03)
    with pytest.raises(ValueError, match="group_size"):
        zero_std_share(correct, 5)


def test_bigger_nested_groups_never_have_more_zero_signal_or_a_noisier_baseline():
    """Groups of 4 are unions of two consecutive groups of 2: if a 4-group is all equal, so are both
    halves, and its mean is the average of theirs (so its squared error is at most their mean)."""
    from rlnb.studies.probes import baseline_error

    g = torch.Generator().manual_seed(1)
    for _ in range(20):
        correct = torch.rand(6, 16, generator=g) < torch.rand(6, 1, generator=g)
        zs = [zero_std_share(correct, G) for G in (2, 4, 8, 16)]
        be = [baseline_error(correct, G) for G in (2, 4, 8, 16)]
        assert zs == sorted(zs, reverse=True) and be == sorted(be, reverse=True) and be[-1] == 0.0


def test_group_size_study_rows():
    res = studies.group_size_study(task="countdown", G_values=(2, 4), n_prompts=4, samples_per_prompt=4, timing_steps=0)
    assert [r["G"] for r in res.rows] == [2, 4]
    assert res.rows[1]["baseline_rmse"] == 0.0 == res.rows[1]["predicted_baseline_rmse"]  # G = M: the mean itself
    for r in res.rows:
        assert 0.0 <= r["zero_std_share"] <= 1.0
    with pytest.raises(ValueError, match="G_values"):
        studies.group_size_study(G_values=(3,), n_prompts=2, samples_per_prompt=4, timing_steps=0)


def test_the_study_bar_ends_full_when_runs_meet_their_sample_budget_early(monkeypatch):
    """A progress bar left short of its total ends red in a notebook: a run that stops early on its sample
    budget must still complete its share of the bar."""
    import rlnb.studies.runner as runner

    seen = []

    class Bar:
        def __init__(self, total, **kw):
            self.total, self.n = total, 0

        def update(self, k):
            self.n += k

        def set_postfix(self, **kw):
            pass

        def close(self):
            seen.append((self.n, self.total))

    def short_run(arm, overrides, *, seed, on_step, steps, **kw):  # stops after 2 of its steps
        on_step(None)
        on_step(None)
        return runner.RunResult(arm=arm, seed=seed, history=[])

    monkeypatch.setattr("tqdm.auto.tqdm", Bar)
    monkeypatch.setattr(runner, "run_one", short_run)
    runner.run_study({"a": {}, "b": {}}, task="add", seeds=[0, 1], steps=5, progress=True)
    assert seen == [(20, 20)]
