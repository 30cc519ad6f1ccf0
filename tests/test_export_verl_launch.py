"""``scripts/launch_verl.py``: for every recipe the printed command's overrides compose with verl's own config
files and the printed report lists every gap; the data it writes is verl's RL parquet layout, and verl's own
loader finds the reward function the command names and scores a correct answer 1.

Building the export needs no verl; the composition and the loader need verl's wheel and hydra-core (make install).
"""

import shlex

import pandas as pd
import pytest

import rlnb
from rlnb.export import to_verl
from rlnb.export.verl_launch import main

NAMES = rlnb.recipes.names()
TINY = ["--prompts-per-step", "2", "--num-generations", "3", "--quiet"]


def command_overrides(capsys, argv):
    exp = main(argv)
    out = capsys.readouterr().out
    words = shlex.split(out.splitlines()[0])
    assert words[:3] == ["python", "-m", "verl.trainer.main_ppo"]
    return exp, out, words[3:]


@pytest.mark.parametrize("name", NAMES)
def test_dry_run_prints_a_command_that_composes_and_every_gap(name, capsys):
    exp, out, overrides = command_overrides(capsys, ["--recipe", name, "--dry-run"])
    assert overrides == exp.args()
    for gap in exp.unsupported + exp.differences:
        assert str(gap) in out
    assert exp.report() in out
    pytest.importorskip("hydra", reason="composing needs hydra-core (make install)")
    from rlnb.export.verl_import import import_verl, verl_config_dir

    try:
        import_verl(modules=("verl.trainer.config",))
    except ImportError as e:
        pytest.skip(str(e))
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(verl_config_dir()), version_base=None):
        cfg = compose(config_name="ppo_trainer", overrides=overrides)
    assert OmegaConf.select(cfg, "actor_rollout_ref.rollout.n") == exp.recipe.num_generations
    assert OmegaConf.select(cfg, "reward.custom_reward_function.name") == "compute_score"


def test_flags_reach_the_command(capsys):
    exp, _, overrides = command_overrides(capsys, ["--recipe", "dapo", "--dry-run", "--n-gpus", "8", "--lr", "1e-6",
                                                   "--verl", "trainer.save_freq=100", *TINY])
    assert {"trainer.n_gpus_per_node=8", "actor_rollout_ref.actor.optim.lr=1e-06", "trainer.save_freq=100",
            "actor_rollout_ref.rollout.n=3", "data.train_batch_size=2"} <= set(overrides)
    with pytest.raises(ValueError, match="--verl: expected KEY=VALUE"):
        main(["--dry-run", "--verl", "no_equals_sign"])


def test_strict_refuses_what_verl_cannot_express():
    with pytest.raises(ValueError, match="prompt-mean"):
        to_verl("scalerl", strict=True, chat_template=True)
    assert to_verl("grpo", strict=True, chat_template=True).unsupported == []


def test_data_is_verls_layout_and_verls_loader_scores_it(tmp_path):
    exp = to_verl("gdpo", "add", data_dir=tmp_path, system_prompt="Be brief.")
    train, val = exp.write_data(n_train=6, n_val=2)
    df = pd.read_parquet(train)
    assert len(df) == 6 and len(pd.read_parquet(val)) == 2
    assert {"data_source", "prompt", "reward_model", "extra_info"} <= set(df.columns)
    row = df.iloc[0]
    pool = exp.task.dataset(6, seed="train:0")
    assert [m["role"] for m in row["prompt"]] == ["system", "user"] and row["prompt"][1]["content"] == pool[0]["prompt"]
    assert row["reward_model"]["ground_truth"] == pool[0]["answer"]
    assert exp.overrides["data.train_files"] == str(train)
    try:
        from rlnb.export.verl_import import import_verl

        load = import_verl(modules=("verl.utils.import_utils",))["verl.utils.import_utils"].load_extern_object
    except ImportError as e:
        pytest.skip(str(e))
    fn = load(module_path=exp.overrides["reward.custom_reward_function.path"],
              object_name=exp.overrides["reward.custom_reward_function.name"])
    info = dict(row["extra_info"])
    good = fn(row["data_source"], pool[0]["target"], row["reward_model"]["ground_truth"], info)
    bad = fn(row["data_source"], "no answer here", row["reward_model"]["ground_truth"], info)
    assert good["correct"] == 1.0 and good["score"] == 1.0 + exp.recipe.format_weight * good["format"]
    assert bad["correct"] == 0.0 and set(good) >= set(exp.overrides["algorithm.gdpo_reward_keys"])


def test_running_without_verls_stack_says_what_to_install(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "ray" else real(n, *a))
    with pytest.raises(SystemExit, match=r"pip install 'rlnb\[verl\]'"):
        main(["--recipe", "grpo", "--quiet"])


def test_the_exits_table_in_the_docs_is_current():
    import re
    from pathlib import Path

    from rlnb.export.exits import exits_table

    text = (Path(__file__).resolve().parents[1] / "docs" / "scaling_up.md").read_text()
    block = re.search(r"<!-- exits:start -->\n(.*?)\n<!-- exits:end -->", text, re.S)
    assert block and block.group(1) == exits_table(), "docs/scaling_up.md's exits table is stale: " \
        "python scripts/regen_tables.py"


def _moved(v):
    """Another legal-looking value of a bool or a number (None: not a kind this test moves)."""
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return v + 1
    if isinstance(v, float):
        return v * 0.5 if v > 0 else 0.1
    return None


CRITIC_ONLY = ("gamma", "lam", "whiten_advantages", "vf_coef", "cliprange_value")
DORMANT = {  # knobs that do nothing in rlnb either under these conditions
    "use_bias_correction_kl": lambda r: r.beta == 0 or r.kl_in_reward, "kl_in_reward": lambda r: r.beta == 0,
    "kl_horizon": lambda r: r.kl_target is None, "entropy_coef_delta": lambda r: r.entropy_target is None,
    "entropy_coef_max": lambda r: r.entropy_target is None, **{k: lambda r: not r.critic for k in CRITIC_ONLY}}


@pytest.mark.parametrize("name", NAMES)
def test_no_knob_is_dropped(name):
    """Move each bool and number knob of the recipe: the verl overrides change, or the report names the knob
    (a gap, a difference, a note), unless the knob cannot act (declared inert, dormant, or its whole registry
    entry is already reported as not expressible)."""
    from rlnb.algos.resolve import inert_knobs
    from rlnb.core.knobs import UNSET
    from rlnb.export import verl_mapping

    base = rlnb.recipes.get(name, num_iterations=2)            # the ratio can leave 1: clip knobs act
    before, stages = verl_mapping(base), base.hyperparameters()
    values = {k: v for d in stages.values() for k, v in d.items()}
    checked = 0
    for knob in rlnb.Recipe.knobs():
        value = values.get(knob, getattr(base, knob))
        new = _moved(value) if value is not UNSET else None
        if new is None or knob in ("prompts_per_step", "num_mini_batches") or new == getattr(rlnb.Recipe(), knob):
            continue
        try:
            r = base.replace(**{knob: new})
            after = verl_mapping(r)
        except (ValueError, TypeError):
            continue                                          # not a legal value here
        owner = next((s for s in ("advantage", "loss") if knob in stages[s]), None)
        if knob in inert_knobs(r) or DORMANT.get(knob, lambda r: False)(r) or \
                owner in {g.field for g in after.unsupported}:
            continue
        assert after.overrides != before.overrides or knob in after.report(), (knob, value, new)
        checked += 1
    assert checked >= 10
