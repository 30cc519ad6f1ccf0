"""Bad inputs across the public API, one row each: the error type, a message that names the argument,
and a trainer (weights, optimizer, RNG, history, cursor) exactly as it was before the call."""

import contextlib
import copy
import hashlib
import math
import re
from types import SimpleNamespace

import pytest
import torch

import rlnb
from rlnb import Batch
from rlnb.algos import ADVANTAGES, AGGREGATIONS
from rlnb.cli import main
from rlnb.models.generate import sample
from rlnb.stages import Advantager, Rewarder, RewardFunctionError, Sampler, make_optimizer


@pytest.fixture(scope="module")
def ctx():
    t = rlnb.Trainer.tiny("grpo", task="add", seed=0, prompts_per_step=2, num_generations=2, max_new_tokens=8)
    t.run(1, progress=False)  # so the optimizer has state and the history a row
    return SimpleNamespace(t=t, batch=t.records[-1].batch, model=t.model, tok=t.tokenizer)


def digest(x):
    """Tensors (also inside dicts and lists) replaced by shape, dtype and a SHA-256 of their bytes."""
    if isinstance(x, torch.Tensor):
        data = x.detach().cpu().contiguous()
        return (tuple(data.shape), str(data.dtype), hashlib.sha256(memoryview(data.numpy()).cast("B")).hexdigest())
    if isinstance(x, dict):
        return {k: digest(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [digest(v) for v in x]
    return x


def fingerprint(t) -> dict:
    """Everything a step may change: weights, optimizer, scheduler, random streams, history, cursor."""
    return digest({"params": list(t.model.parameters()), "optimizer": t.optimizer.state_dict(),
                   "scheduler": t.scheduler.state_dict(), "rng": t.state().rng, "history": t.history,
                   "steps": t.step_count, "drawn": t.prompts_drawn, "recipe": t.recipe, "errors": t.rewarder.errors,
                   "training": t.model.training, "records": len(t.records), "run_target": t.run_target})


@contextlib.contextmanager
def patched(obj, name, value):
    """Set ``obj[name]`` (a dict) or ``obj.name`` for the block, then put the old value back."""
    is_dict = isinstance(obj, dict)
    old = obj[name] if is_dict else getattr(obj, name)
    obj.__setitem__(name, value) if is_dict else setattr(obj, name, value)
    try:
        yield
    finally:
        obj.__setitem__(name, old) if is_dict else setattr(obj, name, old)


@contextlib.contextmanager
def nan_logits(model, row: int, only_training: bool = False):
    """Poison one row of the LM head's output (a forward hook; the weights are untouched). In training the
    update takes the fused LM head (no logits module call), so there the decoder's hidden states are poisoned."""
    def hook(module, inputs, out):
        if only_training and not module.training:
            return out
        hidden = out if torch.is_tensor(out) else out.last_hidden_state
        hidden = hidden.clone()
        hidden[row] = float("nan")
        if torch.is_tensor(out):
            return hidden
        out.last_hidden_state = hidden
        return out

    target = model.get_decoder() if only_training else model.get_output_embeddings()
    handle = target.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def with_reward(c, fn):
    with patched(c.t.rewarder.funcs, "correct", fn):
        c.t.step()


def per_row(bad_row, bad_value):
    return lambda comps, answer, **kw: [bad_value if i == bad_row else 1.0 for i in range(len(comps))]


def boom(c):
    with_reward(c, lambda comps, answer, **kw: 1 / 0)  # raises on the batch and on every completion


def rows(P=2, G=2):
    return {"prompt": [f"{i}+1=" for i in range(P)], "answer": [str(i + 1) for i in range(P)]}


def big_tokenizer(c):
    tok = copy.deepcopy(c.tok)
    tok.add_tokens([f"<extra{i}>" for i in range(200)])
    return tok


NAN = float("nan")
CASES = [
    # --- registries, recipes, tasks ------------------------------------------------------------
    ("unknown recipe", lambda c: rlnb.recipes.get("grp"), KeyError, "recipe", "did you mean 'grpo'"),
    ("unknown recipe field", lambda c: rlnb.recipes.get("grpo", temprature=1.0), TypeError, "temprature",
     "did you mean 'temperature'"),
    ("unknown estimator", lambda c: rlnb.recipes.get("grpo", advantage="grp"), KeyError, "advantage", "known"),
    ("unknown loss", lambda c: rlnb.recipes.get("grpo", loss="ppo-clip"), KeyError, "loss", "ppo_clip"),
    ("unknown aggregation", lambda c: rlnb.recipes.get("grpo", aggregation="token_mean"), KeyError,
     "aggregation", "token-mean"),
    ("unknown KL estimator", lambda c: rlnb.recipes.get("grpo", kl_estimator="k4"), KeyError, "kl_estimator", "k3"),
    ("unknown filter", lambda c: rlnb.recipes.get("grpo", filters=("zero-variance",)), KeyError, "filters[0]",
     "zero_variance"),
    ("unknown task", lambda c: rlnb.Trainer(c.model, c.tok, "addd"), KeyError, "task", "did you mean 'add'"),
    ("registry lookup", lambda c: ADVANTAGES["grp"], KeyError, "advantage estimator", "did you mean 'grpo'"),
    ("zero temperature", lambda c: rlnb.recipes.get("grpo", temperature=0), ValueError, "temperature", "> 0"),
    ("negative temperature", lambda c: rlnb.Trainer(c.model, c.tok, recipe="grpo", temperature=-1.0), ValueError,
     "temperature", "> 0"),
    ("top_p above 1", lambda c: rlnb.recipes.get("grpo", top_p=1.5), ValueError, "top_p", "(0, 1]"),
    ("eps_low above 1", lambda c: rlnb.recipes.get("grpo", eps_low=1.5), ValueError, "eps_low", "[0, 1]"),
    ("negative eps_high", lambda c: rlnb.recipes.get("grpo", eps_high=-0.1), ValueError, "eps_high", ">= 0"),
    ("negative beta", lambda c: rlnb.recipes.get("grpo", beta=-0.01), ValueError, "beta", ">= 0"),
    ("NaN beta", lambda c: rlnb.recipes.get("grpo", beta=NAN), ValueError, "beta", "nan"),
    ("zero eps", lambda c: rlnb.recipes.get("grpo", eps=0.0), ValueError, "eps", "(0, 1]"),
    ("G = 1 for a group estimator", lambda c: rlnb.recipes.get("rloo", num_generations=1), ValueError,
     "num_generations", "G >= 2"),
    ("G = 0", lambda c: rlnb.recipes.get("reinforce", num_generations=0), ValueError, "num_generations", ">= 1"),
    ("G as a string", lambda c: rlnb.recipes.get("grpo", num_generations="8"), TypeError, "num_generations", "int"),
    ("P as a float", lambda c: rlnb.recipes.get("grpo", prompts_per_step=2.5), TypeError, "prompts_per_step", "int"),
    ("zero lr", lambda c: rlnb.recipes.get("grpo", lr=0.0), ValueError, "lr", "> 0"),
    ("more mini-batches than groups", lambda c: rlnb.recipes.get("grpo", prompts_per_step=2, num_mini_batches=3),
     ValueError, "num_mini_batches", "at most"),
    ("top-K loss without top-K", lambda c: rlnb.recipes.get("dppo", loss="dppo_topk_tv"), ValueError,
     "topk_logprobs", ">= 1"),
    ("unknown reward policy", lambda c: rlnb.Trainer(c.model, c.tok, reward_on_error="ignore"), ValueError,
     "reward_on_error", "'zero'"),
    ("bool as a string", lambda c: rlnb.recipes.get("grpo", critic="yes"), TypeError, "critic", "True or False"),
    ("adaptive KL without beta", lambda c: rlnb.Trainer(c.model, c.tok, kl_target=0.1), ValueError, "beta", "> 0"),
    ("overlong buffer past L_max", lambda c: rlnb.recipes.get("dapo", overlong_buffer=64), ValueError,
     "overlong_buffer", "at most"),
    # --- Trainer -------------------------------------------------------------------------------
    ("completions past the context", lambda c: rlnb.Trainer(c.model, c.tok, max_new_tokens=300), ValueError,
     "max_new_tokens", "context of 256"),
    ("tokenizer bigger than the model", lambda c: rlnb.Trainer(c.model, big_tokenizer(c)), ValueError, "tokenizer",
     "embedding"),
    ("no model", lambda c: rlnb.Trainer(None, c.tok), TypeError, "model", "causal LM"),
    ("seed as a string", lambda c: rlnb.Trainer(c.model, c.tok, seed="0"), TypeError, "seed", "int"),
    ("empty pool", lambda c: rlnb.Trainer(c.model, c.tok, pool_size=0), ValueError, "pool_size", "in [1, "),
    ("negative steps", lambda c: c.t.run(-1, progress=False), ValueError, "steps", "non-negative"),
    ("callback not callable", lambda c: c.t.run(1, callbacks=[42], progress=False), TypeError, "callbacks[0]",
     "callable"),
    ("nothing to resume", lambda c: c.t.run(progress=False), ValueError, "steps", "no interrupted run"),
    ("zero eval prompts", lambda c: c.t.evaluate(0), ValueError, "n", "positive int"),
    ("no checkpoint", lambda c: rlnb.Trainer.load("/nonexistent/rlnb-ckpt"), FileNotFoundError, "directory",
     "trainer.json"),
    # --- a step that fails midway is undone --------------------------------------------------------
    ("reward function raises", boom, RewardFunctionError, "reward function 'correct'", "completion 0"),
    ("reward function returns None", lambda c: with_reward(c, per_row(1, None)), RewardFunctionError,
     "reward function 'correct'", "completion 1"),
    ("reward function returns NaN", lambda c: with_reward(c, per_row(2, NAN)), RewardFunctionError,
     "reward function 'correct'", "completion 2"),
    ("reward function returns a string", lambda c: with_reward(c, per_row(3, "1")), RewardFunctionError,
     "reward function 'correct'", "completion 3"),
    ("reward function returns too few", lambda c: with_reward(c, lambda comps, a, **kw: [1.0]), RewardFunctionError,
     "reward function 'correct'", "4 numbers"),
    # the hook poisons row 1 of every LM-head call: in each decode step batch row 1; in the prefill, which runs
    # once per distinct prompt (G = 2), prompt 1, whose completions are rows 2 and 3
    ("NaN logits while sampling", lambda c: _step_with(nan_logits(c.model, 1), c), ValueError, "logits",
     "rows [1, 2, 3]"),
    ("NaN logits in the update", lambda c: _step_with(nan_logits(c.model, 0, only_training=True), c), ValueError,
     "logits", "batch rows"),
    ("NaN advantages", lambda c: _step_with(patched(c.t.advantager, "estimator", lambda r, G: r * NAN), c),
     ValueError, "adv", "rows [0, 1, 2, 3]"),
    ("prompt longer than the context", lambda c: c.t.sampler.step(Batch.from_rows({"prompt": ["1" * 300],
     "answer": ["1"]}, 2)), ValueError, "prompts", "context of 256"),
    # --- stages and batches --------------------------------------------------------------------
    ("G = 0 for a batch", lambda c: Batch.from_rows(rows(), 0), ValueError, "group_size", "positive"),
    ("B not divisible by G", lambda c: Batch(["a"] * 6, ["1"] * 6, torch.zeros(6, dtype=torch.long), 4), ValueError,
     "group_size", "divisor of the batch size B=6"),
    ("old_logp shape", lambda c: c.batch.replace(old_logp=c.batch.old_logp[:, :-1]), ValueError, "old_logp", "shape"),
    ("float token ids", lambda c: c.batch.replace(completion_ids=c.batch.completion_ids.float()), ValueError,
     "completion_ids", "integer dtype"),
    ("integer rewards", lambda c: c.batch.replace(rewards=c.batch.rewards.long()), ValueError, "rewards",
     "floating-point"),
    ("all-masked completion", lambda c: c.t.updater.step(c.batch.replace(mask=c.batch.mask * torch.tensor(
        [[1.0]] * 3 + [[0.0]]))), ValueError, "batch.mask", "all-masked rows [3]"),
    ("NaN rewards", lambda c: c.batch.replace(rewards=torch.tensor([0.0, NAN, 1.0, math.inf])), ValueError,
     "rewards", "rows [1, 3]"),
    ("infinite log-probs", lambda c: c.batch.replace(old_logp=c.batch.old_logp - math.inf), ValueError,
     "old_logp", "rows [0, 1, 2, 3]"),
    ("no completions to score", lambda c: Rewarder.for_task(c.t.task).step(Batch.from_rows(rows(), 2)), ValueError,
     "batch.completions", "Sampler"),
    ("no rewards to compare", lambda c: Advantager(ADVANTAGES["grpo"]).step(Batch.from_rows(rows(), 2)), ValueError,
     "batch.rewards", "Rewarder"),
    ("no advantages to update on", lambda c: c.t.updater.step(c.batch.replace(adv=None)), ValueError, "batch",
     "adv"),
    ("reward function not callable", lambda c: Rewarder({"x": 3}), TypeError, "funcs['x']", "callable"),
    ("unknown reward error policy", lambda c: Rewarder({"x": len}, on_error="skip"), ValueError, "on_error", "'zero'"),
    ("sampler temperature", lambda c: Sampler(c.model, c.tok, temperature=0.0), ValueError, "temperature", "> 0"),
    ("generate temperature", lambda c: sample(c.model, c.batch.prompt_ids, c.batch.prompt_mask, max_new_tokens=2,
     eos_token_id=2, pad_token_id=0, temperature=-1.0), ValueError, "temperature", "> 0"),
    ("negative lr", lambda c: make_optimizer(c.model, lr=-1.0), ValueError, "lr", "> 0"),
    ("rewards not a multiple of G", lambda c: ADVANTAGES["grpo"](torch.ones(5), 2), ValueError, "rewards", "multiple"),
    ("aggregation shape mismatch", lambda c: AGGREGATIONS["token-mean"](torch.ones(2, 3), torch.ones(2, 4)),
     ValueError, "mask", "shape"),
]


def _step_with(patch, c):
    with patch:
        c.t.step()


@pytest.mark.parametrize("name, call, exc, arg, expected", CASES, ids=[case[0] for case in CASES])
def test_bad_input_raises_names_the_argument_and_changes_nothing(ctx, name, call, exc, arg, expected):
    before, batch_before = fingerprint(ctx.t), digest(vars(ctx.batch))
    with pytest.raises(exc) as info:
        call(ctx)
    message = str(info.value.args[0]) if info.value.args else str(info.value)
    assert re.search(r"(^|\W)" + re.escape(arg), message), f"{arg!r} not named in: {message}"
    assert expected.lower() in message.lower(), f"{expected!r} not in: {message}"
    assert fingerprint(ctx.t) == before
    assert digest(vars(ctx.batch)) == batch_before


@pytest.mark.parametrize("argv, flag", [
    (["train", "--recipe", "grp"], "recipe: unknown recipe 'grp'"),
    (["train", "--temperature", "0"], "temperature: expected a number > 0"),
    (["train", "--filters", "zero-variance"], "filters[0]: unknown filter"),
    (["train", "--critic", "maybe"], "argument --critic: expected true or false"),
    (["train", "--steps", "-1"], "argument --steps: expected an int >= 0"),
    (["train", "--pass-rate-threshold", "1.5"], "pass_rate_threshold: expected a number in (0, 1]"),
    (["eval", "--n", "0"], "argument --n: expected an int >= 1"),
])
def test_cli_reports_bad_flags_with_exit_code_2(argv, flag, tmp_path, capsys):
    extra = ["--out", str(tmp_path / "run"), "--steps", "0", "--eval-n", "0"] if argv[0] == "train" else []
    try:
        code = main(argv[:1] + extra + argv[1:])
    except SystemExit as e:  # argparse rejects the flag itself
        code = e.code
    assert code == 2 and flag in capsys.readouterr().err
    assert not (tmp_path / "run").exists()                              # nothing written for a bad run


def test_the_table_covers_at_least_30_inputs():
    assert len(CASES) >= 30 and len({c[0] for c in CASES}) == len(CASES)


def test_after_the_failures_the_trainer_steps_like_an_untouched_one(ctx):
    """The failed steps above consumed no randomness and no prompts: the next step equals a fresh twin's."""
    twin = rlnb.Trainer.tiny("grpo", task="add", seed=0, prompts_per_step=2, num_generations=2, max_new_tokens=8)
    twin.run(1, progress=False)
    strip = lambda h: {k: v for k, v in h.items() if not k.startswith("timing/")}  # noqa: E731
    assert strip(ctx.t.step().metrics) == strip(twin.step().metrics)
