"""The knob table: every hyperparameter declared once on ``Recipe``, and everything derived from it
(validation, sliders, CLI flags, docs/knobs.md) agrees with the declaration and with what runs."""

import inspect
import math
import re
from pathlib import Path

import pytest
import torch

import rlnb
from rlnb.algos import (
    ADVANTAGES,
    AGGREGATIONS,
    FILTERS,
    KL_ESTIMATORS,
    POLICY_LOSSES,
    gae,
    knob_names,
    value_loss,
)
from rlnb.algos.resolve import knob_table_markdown
from rlnb.core.knobs import UNSET
from rlnb.recipe import Recipe

REGISTRIES = {"advantage": ADVANTAGES, "loss": POLICY_LOSSES, "aggregation": AGGREGATIONS,
              "kl_estimator": KL_ESTIMATORS, "filters": FILTERS}
ENTRIES = [(field, name) for field, reg in REGISTRIES.items() for name in sorted(reg)]
KNOBS = Recipe.knobs()
ROOT = Path(__file__).resolve().parents[1]


def _bound_by_recipe():
    """Every function the Trainer fills from a Recipe: the registry entries, GAE and the value loss."""
    return [fn for reg in REGISTRIES.values() for fn in reg.values()] + [gae, value_loss]


@pytest.mark.parametrize("fn", _bound_by_recipe(), ids=lambda f: getattr(f, "registry_name", f.__name__))
def test_every_keyword_hyperparameter_is_a_declared_ranged_knob(fn):
    for name in knob_names(fn):
        assert name in KNOBS, f"{fn.__name__}: {name} is not declared on Recipe"
        k = KNOBS[name]
        if k.kind in ("int", "float"):
            assert k.range is not None, f"{name}: a number without a declared range"
        default = inspect.signature(fn).parameters[name].default
        if default is inspect.Parameter.empty:                # a required keyword: the recipe always fills it
            assert not k.entry, name
        elif hasattr(fn, "registry_name"):                    # an entry's own default: the knob is UNSET
            assert k.entry, f"{name}: {fn.__name__} has its own default, so the knob must default to UNSET"
        else:                                                 # gae, value_loss: one default, the recipe's
            assert Recipe.__dataclass_fields__[name].default == default, name


def test_every_numeric_knob_is_ranged_and_its_slider_and_on_value_lie_inside():
    for name, k in KNOBS.items():
        if k.kind not in ("int", "float"):
            continue
        assert k.range, name
        lo, hi = (float(x) for x in k.range[1:-1].split(","))
        if k.slider is not None:
            a, b = (10 ** k.slider[0], 10 ** k.slider[1]) if k.scale == "log" else k.slider[:2]
            assert lo <= a < b <= hi, (name, k.slider, k.range)
        if k.on is not None:
            rlnb.core.knobs.check_value(k, k.on)


NO_DEFAULT = {"dro": "dro_beta"}


@pytest.mark.parametrize("field, name", ENTRIES)
def test_a_recipe_that_leaves_a_knob_unset_runs_the_entrys_own_default(field, name, default_model):
    if name in NO_DEFAULT:  # an entry whose knob has no default (as in verl) refuses to run unset, naming it
        with pytest.raises(ValueError, match=f"^{NO_DEFAULT[name]}: "):
            Recipe(**{field: name})
        return
    recipe = Recipe(**{field: (name,) if field == "filters" else name}, num_generations=2, prompts_per_step=2,
                    topk_logprobs=2, critic=False)
    t = rlnb.Trainer(*default_model, "add", recipe)
    bound = {"advantage": t.advantager.estimator, "loss": t.updater.loss_fn, "aggregation": t.updater.agg_fn,
             "kl_estimator": t.updater.kl_fn, "filters": (t.advantager.filters or [None])[0]}[field]
    fn = REGISTRIES[field][name]
    stage = {"kl_estimator": "kl"}.get(field, field)
    for knob in knob_names(fn):
        own = inspect.signature(fn).parameters[knob].default
        runs = bound.keywords.get(knob, own)                  # what the call will use
        if KNOBS[knob].entry:
            assert getattr(recipe, knob) is UNSET and runs == own, (name, knob, runs, own)
        assert t.hyperparameters()[stage][knob] == runs


def test_choosing_another_entry_returns_its_knobs_to_the_new_entrys_defaults():
    t = rlnb.Trainer.tiny(rlnb.recipes.get("grpo", loss="cispo"))
    assert t.hyperparameters()["loss"] == {"loss": "cispo", "eps_low": 1.0, "eps_high": 0.28, "cispo_cap": None}
    assert t.updater.loss_fn.keywords == {}                                  # nothing overrides cispo's own
    kept = rlnb.recipes.get("grpo", loss="cispo", eps_high=0.5).hyperparameters()["loss"]
    assert (kept["eps_low"], kept["eps_high"]) == (1.0, 0.5)                 # what you set yourself stays
    assert rlnb.recipes.get("dppo", loss="dppo_kl").hyperparameters()["loss"]["dppo_delta"] == 0.05
    assert rlnb.recipes.get("grpo", advantage="maxrl").hyperparameters()["advantage"] == \
        {"advantage": "maxrl", "eps": 1e-6}
    same = rlnb.recipes.get("dapo", loss="ppo_clip")                         # the same entry: nothing released
    assert same.eps_high == 0.28


def test_recipes_write_their_papers_clip_values_explicitly():
    assert (rlnb.recipes.get("grpo").eps_low, rlnb.recipes.get("grpo").eps_high) == (0.2, 0.2)
    assert (rlnb.recipes.get("gspo").eps_low, rlnb.recipes.get("gspo").eps_high) == (3e-4, 4e-4)
    assert rlnb.recipes.get("dppo").dppo_delta == 0.15


def test_to_dict_leaves_unset_knobs_out_and_round_trips():
    r = rlnb.recipes.get("grpo", loss="cispo")
    d = r.to_dict()
    assert "eps_low" not in d and "eps_high" not in d and d["loss"] == "cispo"
    assert Recipe(**d) == r and Recipe(**d).eps_low is UNSET


INTS = [n for n, k in KNOBS.items() if k.kind == "int"]
FLOATS = [n for n, k in KNOBS.items() if k.kind == "float"]


@pytest.mark.parametrize("name", INTS)
def test_a_400_digit_int_is_a_value_error_naming_the_knob(name):
    with pytest.raises(ValueError, match=rf"^{name}: expected .*an int of 401 digits"):
        Recipe(**{name: 10**400})


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 10**400])
def test_nan_inf_and_huge_numbers_are_value_errors_naming_the_knob(name, bad):
    with pytest.raises(ValueError, match=rf"^{name}: expected"):
        Recipe(**{name: bad})


def test_format_weight_has_a_range_and_the_thermostat_rule_ties_the_coefficients():
    assert Recipe(format_weight=-0.5).format_weight == -0.5                  # any finite weight
    with pytest.raises(ValueError, match="^format_weight: expected a finite number, got nan"):
        Recipe(format_weight=float("nan"))
    with pytest.raises(ValueError, match="^entropy_coef: .*entropy_coef_max=0.05"):
        Recipe(entropy_target=0.3, entropy_coef=0.1)
    assert Recipe(entropy_coef=0.1).entropy_coef == 0.1                      # no thermostat: no bound
    with pytest.raises(TypeError, match="^eps_low: expected a number, got '0.2'"):
        Recipe(eps_low="0.2")


def test_knob_table_in_docs_is_generated_from_the_declarations():
    text = (ROOT / "docs" / "knobs.md").read_text()
    block = re.search(r"<!-- knobs:start -->\n(.*?)\n<!-- knobs:end -->", text, re.S)
    assert block and block.group(1).strip() == knob_table_markdown(Recipe).strip(), \
        "run python scripts/regen_tables.py"
    for name in KNOBS:
        assert f"| `{name}` |" in block.group(1)


def test_cli_has_one_flag_per_knob_with_its_declared_range():
    from rlnb.cli import build_parser

    parser = build_parser()
    train = next(a for a in parser._subparsers._group_actions[0].choices.values() if a.prog.endswith("train"))
    flags = {o for a in train._actions for o in a.option_strings}
    assert {k.flag for k in KNOBS.values() if k.group != "meta"} <= flags
    args = parser.parse_args(["train", "--eps-low", "0.1", "--num-generations", "4", "--dual-clip-c", "none",
                              "--unbiased", "off"])
    assert (args.r_eps_low, args.r_num_generations, args.r_dual_clip_c, args.r_unbiased) == (0.1, 4, None, False)
    with pytest.raises(SystemExit):
        parser.parse_args(["train", "--num-generations", "4.5"])              # not an int: argparse error
    assert "Range [0, 1]." in next(a for a in train._actions if "--eps-low" in a.option_strings).help


def test_reconfigure_changes_knobs_between_steps_and_refuses_bad_values_whole():
    t = rlnb.Trainer.tiny("grpo", task="countdown", prompts_per_step=4, num_generations=4, max_new_tokens=8,
                          warmup_steps=4)
    t.logged_knobs = ("eps_high", "lr", "beta")
    t.step()
    assert t.history[0]["grad_norm"] > 0, "the test needs a first step with signal (seed 0 has it)"
    before = (t.recipe, [p.clone() for p in t.model.parameters()], t.optimizer.param_groups[0]["lr"])
    with pytest.raises(ValueError, match="^eps_high: expected"):
        t.reconfigure(eps_high=-1.0)
    assert t.recipe is before[0] and t.optimizer.param_groups[0]["lr"] == before[2]
    t.reconfigure(eps_high=0.28, lr=1e-3)
    assert t.updater.loss_fn.keywords["eps_high"] == 0.28
    assert t.optimizer.param_groups[0]["lr"] == pytest.approx(1e-3 * 2 / 4)  # lr x warm-up factor at step 1
    t.reconfigure(beta=0.05)                                                 # KL on mid-run
    ref = dict(t.ref_model.named_parameters())
    start = rlnb.load_default()[0]
    assert all(torch.equal(ref[n], p) for n, p in start.named_parameters())  # the model the run started from
    t.step()
    assert [t.history[i]["hp/eps_high"] for i in (0, 1)] == [0.2, 0.28]
    assert t.history[1]["hp/beta"] == 0.05 and t.history[1]["kl"] > 0
    assert t.history[1]["hp/lr"] == 1e-3
    with pytest.raises(ValueError, match="^critic: "):
        t.reconfigure(critic=True)


def test_dashboard_and_rlnb_info_show_what_runs(capsys):
    from rlnb.cli import main
    from rlnb.viz import Dashboard

    t = rlnb.Trainer.tiny(rlnb.recipes.get("grpo", loss="cispo"), prompts_per_step=2, num_generations=2)
    dash = Dashboard(t, backend="static")
    assert "eps_low=1.0, eps_high=0.28" in dash.hparams.value and dash.hparams in dash.widget.children
    assert main(["info", "--recipe", "grpo", "--loss", "cispo"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("loss "))
    assert "loss='cispo', eps_low=1.0, eps_high=0.28, cispo_cap=None" in line
