"""Hostile inputs at every public boundary, one table row each, as a careless or hostile user would try
them: lists where tensors are expected, NaN and inf, wrong shapes, dtypes and devices, out-of-range ids,
split groups, a stage handed a batch without its inputs, task parameters that cannot work, broken data
files, a model on the meta device, a device that does not exist.

Every row asserts the error type (TypeError/ValueError, KeyError for unknown names, FileNotFoundError for
missing files), that the message starts with the argument's name and says what was expected, and that
nothing changed: the inputs, torch's global random state and, for rows that involve the trainer, its
weights, optimizer, scheduler, random streams, history and prompt cursor."""

import copy
import re
from types import SimpleNamespace

import pytest
import torch

import rlnb
from rlnb import Batch, tasks
from rlnb.algos import (
    ADVANTAGES,
    AGGREGATIONS,
    FILTERS,
    KL_ESTIMATORS,
    POLICY_LOSSES,
    AdaptiveKLController,
    EntropyThermostat,
    extra_inputs,
    gae,
    kl_penalized_rewards,
    overlong_penalty,
    value_loss,
)
from rlnb.algos.losses_trust_region import topk_divergence
from rlnb.core.checks import check_device
from rlnb.logprobs import chunked_token_logprobs, token_logprobs
from rlnb.models.generate import sample
from rlnb.stages import Advantager, Rewarder, Sampler, Updater, make_optimizer
from tests.test_validation_table import digest, fingerprint

NAN, INF = float("nan"), float("inf")
META = torch.device("meta")  # a second device every machine has


@pytest.fixture(scope="module")
def ctx():
    t = rlnb.Trainer.tiny("grpo", task="add", seed=0, prompts_per_step=2, num_generations=2, max_new_tokens=8,
                          pool_size=16)
    t.run(1, progress=False)
    return SimpleNamespace(t=t, batch=t.records[-1].batch, model=t.model, tok=t.tokenizer)


# --- registry entries: generated rows ----------------------------------------------------------------
def R(*v):
    return torch.tensor(v, dtype=torch.float32)


def loss_inputs(B=2, T=3):
    g = torch.Generator().manual_seed(0)
    logp = -torch.rand(B, T, generator=g)
    return dict(logp=logp, old_logp=logp - 0.1, adv=R(1.0, -1.0), mask=torch.ones(B, T))


def with_topk(fn, kw):
    if "topk_logp" in extra_inputs(fn):
        kw = {**kw, "topk_logp": torch.full((2, 3, 2), -2.0), "old_topk_logp": torch.full((2, 3, 2), -2.1)}
    return kw


LOSS_BAD = [  # (what, change to the valid inputs, error, message start)
    ("logp as a list", lambda k: {**k, "logp": k["logp"].tolist()}, TypeError, "logp: expected a torch.Tensor"),
    ("old_logp as a list", lambda k: {**k, "old_logp": k["old_logp"].tolist()}, TypeError, "old_logp: expected a"),
    ("adv as a list", lambda k: {**k, "adv": [1.0, -1.0]}, TypeError, "adv: expected a torch.Tensor"),
    ("adv as a number", lambda k: {**k, "adv": 1.0}, TypeError, "adv: expected a torch.Tensor"),
    ("mask as a list", lambda k: {**k, "mask": [[1, 1, 1]] * 2}, TypeError, "mask: expected a torch.Tensor"),
    ("NaN logp", lambda k: {**k, "logp": k["logp"].index_fill(1, torch.tensor([1]), NAN)}, ValueError,
     "logp: expected finite values, got NaN or inf in rows [0, 1]"),
    ("-inf old_logp", lambda k: {**k, "old_logp": k["old_logp"].index_fill(0, torch.tensor([1]), -INF)},
     ValueError, "old_logp: expected finite values, got NaN or inf in rows [1]"),
    ("inf advantage", lambda k: {**k, "adv": R(INF, 0.0)}, ValueError, "adv: expected finite values"),
    ("NaN advantage", lambda k: {**k, "adv": R(0.0, NAN)}, ValueError, "adv: expected finite values"),
    ("integer logp", lambda k: {**k, "logp": k["logp"].long()}, TypeError, "logp: expected a floating-point"),
    ("mask of halves", lambda k: {**k, "mask": torch.full((2, 3), 0.5)}, ValueError, "mask: expected 0/1 values"),
    ("mask of twos", lambda k: {**k, "mask": torch.full((2, 3), 2)}, ValueError, "mask: expected 0/1 values"),
    ("short old_logp", lambda k: {**k, "old_logp": k["old_logp"][:, :2]}, ValueError, "logp, old_logp, mask"),
    ("1-D logp", lambda k: {**k, "logp": k["logp"][0], "old_logp": k["old_logp"][0], "mask": k["mask"][0]},
     ValueError, "logp, old_logp, mask: expected equal (B, T)"),
    ("adv for 3 rows", lambda k: {**k, "adv": R(1.0, 0.0, 2.0)}, ValueError, "adv: expected shape (B,) or (B, T)"),
    ("adv on another device", lambda k: {**k, "adv": torch.empty(2, device=META)}, ValueError, "adv: expected a tensor on"),
    ("mask on another device", lambda k: {**k, "mask": torch.ones(2, 3, device=META)}, ValueError, "mask: expected"),
]

ADV_BAD = [
    ("rewards as a list", lambda: ([1.0, 0.0], 2), TypeError, "rewards: expected a torch.Tensor"),
    ("rewards as a number", lambda: (1.0, 1), TypeError, "rewards: expected a torch.Tensor"),
    ("NaN reward", lambda: (R(1.0, NAN, 0.0, 1.0), 2), ValueError, "rewards: expected finite values, got NaN or inf in rows [1]"),
    ("inf reward", lambda: (R(INF, 0.0), 2), ValueError, "rewards: expected finite values"),
    ("-inf reward", lambda: (R(0.0, -INF), 2), ValueError, "rewards: expected finite values"),
    ("B not a multiple of G", lambda: (R(1.0, 0.0, 1.0), 2), ValueError, "rewards: expected a 1-D tensor"),
    ("2-D rewards", lambda: (torch.ones(2, 2), 2), ValueError, "rewards: expected a 1-D tensor"),
    ("no rewards", lambda: (torch.ones(0), 2), ValueError, "rewards: expected a 1-D tensor"),
    ("G = 0", lambda: (R(1.0, 0.0), 0), ValueError, "group_size: expected a positive int"),
    ("G negative", lambda: (R(1.0, 0.0), -2), ValueError, "group_size: expected a positive int"),
    ("G as a bool", lambda: (R(1.0, 0.0), True), TypeError, "group_size: expected a positive int"),
    ("G as a float", lambda: (R(1.0, 0.0), 2.0), TypeError, "group_size: expected a positive int"),
    ("G as a string", lambda: (R(1.0, 0.0), "2"), TypeError, "group_size: expected a positive int"),
    ("complex rewards", lambda: (torch.ones(2, dtype=torch.complex64), 2), TypeError, "rewards: expected a real"),
]

ADV_EXTRA_BAD = [  # for the estimators that read an extra input (ReMax's greedy rewards, OPO's lengths, ...)
    ("missing", lambda: None, ValueError, "needs"),
    ("as a list", lambda: [1.0, 0.0, 1.0, 0.0], TypeError, "expected a torch.Tensor"),
    ("with NaN", lambda: R(1.0, NAN, 1.0, 1.0), ValueError, "expected finite values"),
    ("with inf", lambda: R(INF, 1.0, 1.0, 1.0), ValueError, "expected finite values"),
    ("of 3 rows", lambda: R(1.0, 1.0, 1.0), ValueError, "expected shape (4,)"),
    ("on another device", lambda: torch.ones(4, device=META), ValueError, "expected a tensor on"),
]


def _adv_extra_row(name, fn, extra, what, make, err, msg):
    return (f"advantage {name}: {extra} {what}", lambda c: fn(R(1.0, 0.0, 1.0, 1.0), 2, **{extra: make()}),
            err, f"{extra}: " if msg != "needs" else f"{extra}: the advantage estimator")


def _tokens(v=0.5, rows=4):
    return torch.full((rows, 3), v)


# entries whose extra inputs are not (B,) tensors: the optimal token baselines' (B, T) inputs, GDPO's parts
TOKEN_EXTRA_BAD = [
    ("missing", lambda: None, ValueError, "the advantage estimator"),
    ("as a list", lambda: [[0.5] * 3] * 4, TypeError, "expected a torch.Tensor"),
    ("with NaN", lambda: _tokens(NAN), ValueError, "expected finite values"),
    ("with inf", lambda: _tokens(INF), ValueError, "expected finite values"),
    ("of 3 rows", lambda: _tokens(rows=3), ValueError, "expected shape"),
    ("of 1-D", lambda: R(0.5, 0.5, 0.5, 0.5), ValueError, "expected a 2-D tensor"),
    ("on another device", lambda: torch.ones(4, 3, device=META), ValueError, "expected a tensor on"),
]
GDPO_BAD = [
    ("reward_parts missing", dict(reward_parts=None), ValueError, "reward_parts: the advantage estimator"),
    ("reward_parts as a tensor", dict(reward_parts=R(1.0, 0.0, 1.0, 1.0)), TypeError, "reward_parts: expected a non-empty dict"),
    ("reward_parts with NaN", dict(reward_parts={"f": R(1.0, NAN, 1.0, 1.0)}), ValueError, "reward_parts['f']: expected finite"),
    ("reward_parts of 3 rows", dict(reward_parts={"f": R(1.0, 1.0, 1.0)}), ValueError, "reward_parts['f']: expected shape (4,)"),
    ("reward_parts on another device", dict(reward_parts={"f": torch.ones(4, device=META)}), ValueError,
     "reward_parts['f']: expected a tensor on"),
    ("reward_weights as a list", dict(reward_weights=[1.0, 0.5]), TypeError, "reward_weights: expected a torch.Tensor"),
    ("reward_weights with inf", dict(reward_weights=R(1.0, INF)), ValueError, "reward_weights: expected finite"),
    ("reward_weights of 3 parts", dict(reward_weights=R(1.0, 1.0, 1.0)), ValueError, "reward_weights: expected (2,) or (4, 2)"),
    ("reward_weights on another device", dict(reward_weights=torch.ones(2, device=META)), ValueError,
     "reward_weights: expected a tensor on"),
    ("mask with NaN", dict(mask=_tokens(NAN)), ValueError, "mask: expected finite"),
    ("mask of 3 rows", dict(mask=_tokens(rows=3)), ValueError, "mask: expected (4, T)"),
    ("mask on another device", dict(mask=torch.ones(4, 3, device=META)), ValueError, "mask: expected a tensor on"),
]


def _token_extra_row(name, fn, extra, what, make, err, msg):
    def call(c):
        inputs = {"old_logp": _tokens().log(), "sum_pi_squared": _tokens(), "mask": torch.ones(4, 3), extra: make()}
        return fn(R(1.0, 0.0, 1.0, 1.0), 2, **inputs)
    return (f"advantage {name}: {extra} {what}", call, err, f"{extra}: {msg}")


def _gdpo_row(what, change, err, msg):
    parts = {"correct": R(1.0, 0.0, 1.0, 1.0), "format": R(1.0, 1.0, 0.0, 1.0)}
    inputs = {"reward_parts": parts, "reward_weights": R(1.0, 0.5), "mask": torch.ones(4, 3), **change}
    return (f"advantage gdpo: {what}", lambda c: ADVANTAGES["gdpo"](R(1.5, 0.5, 1.0, 1.5), 2, **inputs), err, msg)


# rows of their own below; vineppo's bad inputs: tests/test_algos_credit.py (its (B,) prefix-value form needs no lengths)
PER_ENTRY_EXTRAS = {"gdpo", "optimal_token_baseline", "tir_optimal_token_baseline", "vineppo"}


AGG_BAD = [
    ("loss as a list", lambda: ([[1.0, 2.0]], torch.ones(1, 2)), TypeError, "loss: expected a torch.Tensor"),
    ("mask as a list", lambda: (torch.ones(1, 2), [[1, 1]]), TypeError, "mask: expected a torch.Tensor"),
    ("NaN loss", lambda: (torch.tensor([[1.0, NAN]]), torch.ones(1, 2)), ValueError, "loss: expected finite values"),
    ("inf loss", lambda: (torch.tensor([[INF, 1.0]]), torch.ones(1, 2)), ValueError, "loss: expected finite values"),
    ("mask shape", lambda: (torch.ones(2, 3), torch.ones(2, 4)), ValueError, "loss, mask: expected equal (B, T)"),
    ("mask of halves", lambda: (torch.ones(2, 3), torch.full((2, 3), 0.5)), ValueError, "mask: expected 0/1"),
    ("integer loss", lambda: (torch.ones(2, 3, dtype=torch.long), torch.ones(2, 3)), TypeError, "loss: expected a floating"),
    ("mask on another device", lambda: (torch.ones(2, 3), torch.ones(2, 3, device=META)), ValueError, "mask: expected"),
]

KL_BAD = [
    ("logp as a list", lambda: ([0.0, -1.0], R(0.0, -1.0)), TypeError, "logp: expected a torch.Tensor"),
    ("ref_logp as a list", lambda: (R(0.0, -1.0), [0.0, -1.0]), TypeError, "ref_logp: expected a torch.Tensor"),
    ("NaN logp", lambda: (R(NAN, -1.0), R(0.0, -1.0)), ValueError, "logp: expected finite values"),
    ("-inf ref_logp", lambda: (R(0.0, -1.0), R(-INF, -1.0)), ValueError, "ref_logp: expected finite values"),
    ("shape mismatch", lambda: (torch.zeros(2, 3), torch.zeros(2, 4)), ValueError, "ref_logp: expected the shape"),
    ("integer logp", lambda: (torch.zeros(2, dtype=torch.long), R(0.0, 0.0)), TypeError, "logp: expected a floating"),
    ("another device", lambda: (R(0.0, 0.0), torch.zeros(2, device=META)), ValueError, "ref_logp: expected a tensor on"),
]

FILTER_BAD = [
    ("rewards as a list", lambda: dict(rewards=[1.0, 0.0], group_size=2), TypeError, "rewards: expected a torch.Tensor"),
    ("NaN reward", lambda: dict(rewards=R(NAN, 0.0), group_size=2), ValueError, "rewards: expected finite"),
    ("B not a multiple of G", lambda: dict(rewards=R(1.0, 0.0, 1.0), group_size=2), ValueError, "rewards: expected"),
    ("G as a bool", lambda: dict(rewards=R(1.0, 0.0), group_size=True), TypeError, "group_size: expected"),
    ("G = 0", lambda: dict(rewards=R(1.0, 0.0), group_size=0), ValueError, "group_size: expected"),
]


def _loss_row(name, fn, what, change, err, msg):
    return (f"loss {name}: {what}", lambda c: fn(**change(with_topk(fn, loss_inputs()))), err, msg)


def _agg_row(name, fn, what, make, err, msg):
    extra = {"group_size": 1} if name == "prompt-mean" else {}
    extra.update({"max_new_tokens": 4} if name == "seq-mean-token-sum-norm" else {})
    return (f"aggregation {name}: {what}", lambda c: fn(*make(), **extra), err, msg)


def _filter_row(name, fn, what, make, err, msg):
    extra = {"truncated": torch.zeros(2, dtype=torch.bool), "correct": torch.zeros(2, dtype=torch.bool)}
    return (f"filter {name}: {what}", lambda c: fn(**make(), **extra), err, msg)


GENERATED = (
    [_loss_row(n, f, *bad) for n, f in sorted(POLICY_LOSSES.items()) for bad in LOSS_BAD]
    + [(f"advantage {n}: {what}", (lambda entry, mk: lambda c: entry(*mk()))(f, make), err, msg)
       for n, f in sorted(ADVANTAGES.items()) for what, make, err, msg in ADV_BAD]
    + [_adv_extra_row(n, f, x, *bad) for n, f in sorted(ADVANTAGES.items()) for x in extra_inputs(f)
       for bad in ADV_EXTRA_BAD if n not in PER_ENTRY_EXTRAS]
    + [_token_extra_row(n, ADVANTAGES[n], x, *bad) for n in ("optimal_token_baseline", "tir_optimal_token_baseline")
       for x in extra_inputs(ADVANTAGES[n]) for bad in TOKEN_EXTRA_BAD
       if not (x == "rollout_is_weights" and bad[0] == "missing")]  # optional: None = no IS weights (verl)
    + [_gdpo_row(*bad) for bad in GDPO_BAD]
    + [_agg_row(n, f, *bad) for n, f in sorted(AGGREGATIONS.items()) for bad in AGG_BAD]
    + [(f"KL {n}: {what}", (lambda entry, mk: lambda c: entry(*mk()))(f, make), err, msg)
       for n, f in sorted(KL_ESTIMATORS.items()) for what, make, err, msg in KL_BAD]
    + [_filter_row(n, f, *bad) for n, f in sorted(FILTERS.items()) for bad in FILTER_BAD]
)


# --- batches, stages, the trainer, tasks, data, models, devices: written rows -----------------------
def rows(P=2):
    return {"prompt": [f"{i}+1=" for i in range(P)], "answer": [str(i + 1) for i in range(P)]}


def bare(G=2, P=2):
    return Batch.from_rows(rows(P), G)


def swap_rows(b, i, j):
    order = list(range(b.B))
    order[i], order[j] = order[j], order[i]
    return dict(prompts=[b.prompts[k] for k in order], answers=[b.answers[k] for k in order],
                prompt_index=b.prompt_index[order])


def meta_model(c):
    with torch.device("meta"):
        return copy.deepcopy(c.model).to_empty(device="meta")


def torn_file(tmp, text):
    path = tmp / "data.jsonl"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


GOOD_LINE = '{"question": "2 apples and 3 more?", "answer": "2 + 3 = 5\\n#### 5"}\n'

WRITTEN = [
    # --- Batch: types, shapes, dtypes, devices, values, group layout ----------------------------------
    ("Batch rewards as a list", lambda c: c.batch.replace(rewards=[0.0] * 4), TypeError,
     "Batch.rewards: expected a torch.Tensor, got list"),
    ("Batch mask as numpy", lambda c: c.batch.replace(mask=c.batch.mask.numpy()), TypeError,
     "Batch.mask: expected a torch.Tensor, got ndarray"),
    ("Batch prompts as a tuple", lambda c: c.batch.replace(prompts=tuple(c.batch.prompts)), TypeError,
     "Batch.prompts: expected a list of strings"),
    ("Batch answers with a number", lambda c: c.batch.replace(answers=[1, "2", "2", "3"]), TypeError,
     "Batch.answers: expected a list of strings"),
    ("Batch completions with None", lambda c: c.batch.replace(completions=[None] * 4), TypeError,
     "Batch.completions: expected a list of strings"),
    ("Batch extras not tensors", lambda c: c.batch.replace(extras={"x": [1, 2, 3, 4]}), TypeError, "Batch.extras"),
    ("Batch reward_parts not tensors", lambda c: c.batch.replace(reward_parts={"x": 1.0}), TypeError,
     "Batch.reward_parts"),
    ("Batch split groups", lambda c: c.batch.replace(**swap_rows(c.batch, 1, 2)), ValueError,
     "Batch.prompts: expected groups of G=2 contiguous rows"),
    ("Batch interleaved prompt ids", lambda c: Batch(["a"] * 4, ["1"] * 4, torch.tensor([0, 1, 0, 1]), 2),
     ValueError, "Batch.prompt_index: expected one index per group"),
    ("Batch answers differ in a group", lambda c: Batch(["a"] * 4, ["1", "2", "3", "3"], torch.zeros(4).long(), 2),
     ValueError, "Batch.answers: expected groups"),
    ("Batch negative prompt index", lambda c: Batch(["a"] * 2, ["1"] * 2, torch.tensor([-1, -1]), 2), ValueError,
     "Batch.prompt_index: expected non-negative"),
    ("Batch negative token id", lambda c: c.batch.replace(completion_ids=c.batch.completion_ids - 1000), ValueError,
     "Batch.completion_ids: expected non-negative ids"),
    ("Batch mask with a gap", lambda c: c.batch.replace(mask=torch.tensor([[1.0, 0.0, 1.0] + [0.0] * (c.batch.mask.shape[1] - 3)]
                                                                       * 4)), ValueError, "Batch.mask: expected right-padded"),
    ("Batch prompt mask right-padded", lambda c: c.batch.replace(prompt_mask=c.batch.prompt_mask.flip(-1).clone()
                                                                 .index_fill(1, torch.tensor([0]), 1)
                                                                 .index_fill(1, torch.tensor([1]), 0)), ValueError,
     "Batch.prompt_mask: expected left-padded"),
    ("Batch prompt mask of twos", lambda c: c.batch.replace(prompt_mask=c.batch.prompt_mask * 2), ValueError,
     "Batch.prompt_mask: expected 0/1 values"),
    ("Batch prompt mask without ids", lambda c: bare().replace(prompt_mask=torch.ones(4, 2)), ValueError,
     "Batch.prompt_mask: expected None without prompt_ids"),
    ("Batch tensor on another device", lambda c: c.batch.replace(rewards=torch.zeros(4, device=META)), ValueError,
     "Batch.rewards: expected a tensor on cpu"),
    ("Batch extras with 3 rows", lambda c: c.batch.replace(extras={"x": torch.zeros(3)}), ValueError,
     "Batch.extras['x']: expected shape (4, ...)"),
    ("Batch NaN reward part", lambda c: c.batch.replace(reward_parts={"x": R(0.0, NAN, 0.0, 0.0)}), ValueError,
     "Batch.reward_parts['x']: expected finite values"),
    ("Batch integer reward part", lambda c: c.batch.replace(reward_parts={"x": torch.zeros(4).long()}), ValueError,
     "Batch.reward_parts['x']: expected a floating-point dtype"),
    ("Batch bool group size", lambda c: Batch(["a"] * 2, ["1"] * 2, torch.zeros(2).long(), True), ValueError,
     "Batch.group_size: expected a positive int"),
    ("Batch float keep", lambda c: c.batch.replace(keep=torch.ones(4)), ValueError, "Batch.keep: expected dtype torch.bool"),
    ("Batch complex mask", lambda c: c.batch.replace(mask=c.batch.mask.to(torch.complex64)), ValueError, "Batch.mask"),
    ("Batch zero-width completions", lambda c: c.batch.replace(completion_ids=torch.zeros(4, 0).long(), mask=None,
                                                              old_logp=None, ref_logp=None),
     ValueError, "Batch.completion_ids: expected at least one token column"),
    ("from_rows G as a bool", lambda c: Batch.from_rows(rows(), True), ValueError, "group_size: expected a positive"),
    ("from_rows without answers", lambda c: Batch.from_rows({"prompt": ["a"]}, 2), KeyError, "rows: expected a mapping"),
    ("from_rows no prompts", lambda c: Batch.from_rows({"prompt": [], "answer": []}, 2), ValueError, "rows: expected"),
    ("from_rows prompt numbers", lambda c: Batch.from_rows({"prompt": [1, 2], "answer": ["1", "2"]}, 2), TypeError,
     "rows['prompt']: expected strings"),
    # --- stages handed a batch without their inputs -------------------------------------------------
    ("Sampler given a list", lambda c: c.t.sampler.step(["1+1="]), TypeError, "batch: Sampler.step expected a Batch"),
    ("Rewarder before the Sampler", lambda c: c.t.rewarder.step(bare()), ValueError,
     "batch.completions: Rewarder needs it"),
    ("Rewarder given a dict", lambda c: c.t.rewarder.step({"completions": ["1"]}), TypeError, "batch: Rewarder.step"),
    ("overlong shaping without a mask", lambda c: Rewarder.for_task(c.t.task, overlong_buffer=2, max_new_tokens=8)
     .step(bare().replace(completions=["1"] * 4)), ValueError, "batch.mask: Rewarder needs it"),
    ("KL in the reward without ref_logp", lambda c: Rewarder.for_task(c.t.task, kl_coef=0.1).step(
        c.batch.replace(ref_logp=None)), ValueError, "batch.ref_logp: Rewarder needs it"),
    ("Advantager before the Rewarder", lambda c: c.t.advantager.step(bare()), ValueError,
     "batch.rewards: Advantager needs it"),
    ("GAE without values", lambda c: Advantager(ADVANTAGES["grpo"], gae=gae).step(c.batch), ValueError,
     "batch.old_values: Advantager needs it"),
    ("dynamic sampling without verdicts", lambda c: Advantager(ADVANTAGES["grpo"], filters=[FILTERS["dynamic_sampling"]])
     .step(c.batch.replace(correct=None, keep=None)), ValueError, "correct: dynamic_sampling needs"),
    ("Updater before the Advantager", lambda c: c.t.updater.step(c.batch.replace(adv=None)), ValueError,
     "batch.adv: Updater needs it"),
    ("Updater without completions", lambda c: c.t.updater.step(bare().replace(adv=R(0, 0, 0, 0))), ValueError,
     "batch.mask: Updater needs it"),  # on-policy, pi_old may come from the update's own forward
    ("off-policy Updater without old_logp", lambda c: Updater(c.model, c.t.optimizer, loss_fn=POLICY_LOSSES["pg"],
                                                              agg_fn=AGGREGATIONS["token-mean"], num_iterations=2)
     .step(c.batch.replace(old_logp=None)), ValueError, "batch.old_logp: Updater needs it"),
    ("Updater without top-K ids", lambda c: Updater(c.model, c.t.optimizer, loss_fn=POLICY_LOSSES["dppo_topk_tv"],
                                                     agg_fn=AGGREGATIONS["token-mean"]).step(c.batch), ValueError,
     "batch.extras['topk_ids']: Updater needs it"),
    ("Updater for a critic without returns", lambda c: Updater(c.model, c.t.optimizer, loss_fn=POLICY_LOSSES["pg"],
                                                               agg_fn=AGGREGATIONS["token-mean"], value_head=object())
     .step(c.batch), ValueError, "batch.old_values: Updater needs it"),
    # --- stage and optimizer arguments: through the knob declarations ----------------------------------
    ("Sampler NaN temperature", lambda c: Sampler(c.model, c.tok, temperature=NAN), ValueError, "temperature: expected"),
    ("Sampler top_p 0", lambda c: Sampler(c.model, c.tok, top_p=0.0), ValueError, "top_p: expected a number in (0, 1]"),
    ("Sampler 400-digit tokens", lambda c: Sampler(c.model, c.tok, max_new_tokens=10**400), ValueError,
     "max_new_tokens: expected"),
    ("Sampler tokens as a float", lambda c: Sampler(c.model, c.tok, max_new_tokens=8.0), TypeError,
     "max_new_tokens: expected an int"),
    ("Sampler negative top-K", lambda c: Sampler(c.model, c.tok, topk=-1), ValueError, "topk: expected"),
    ("Sampler fp32 head as a string", lambda c: Sampler(c.model, c.tok, fp32_lm_head="yes"), TypeError,
     "fp32_lm_head: expected True or False"),
    ("Updater NaN beta", lambda c: Updater(c.model, c.t.optimizer, loss_fn=len, agg_fn=len, beta=NAN), ValueError,
     "beta: expected"),
    ("Updater zero epochs", lambda c: Updater(c.model, c.t.optimizer, loss_fn=len, agg_fn=len, num_iterations=0),
     ValueError, "num_iterations: expected"),
    ("Updater inf grad norm", lambda c: Updater(c.model, c.t.optimizer, loss_fn=len, agg_fn=len, max_grad_norm=INF),
     ValueError, "max_grad_norm: expected"),
    ("Updater loss not callable", lambda c: Updater(c.model, c.t.optimizer, loss_fn="ppo_clip", agg_fn=len), TypeError,
     "loss_fn: expected a callable"),
    ("optimizer inf lr", lambda c: make_optimizer(c.model, lr=INF), ValueError, "lr: expected"),
    ("optimizer lr as a string", lambda c: make_optimizer(c.model, lr="1e-4"), TypeError, "lr: expected a number"),
    ("optimizer negative warm-up", lambda c: make_optimizer(c.model, lr=1e-4, warmup_steps=-1), ValueError,
     "warmup_steps: expected"),
    ("Rewarder NaN KL coefficient", lambda c: Rewarder({"x": len}, kl_coef=NAN), ValueError, "kl_coef: expected"),
    ("Rewarder funcs as a list", lambda c: Rewarder([len]), TypeError, "funcs: expected a non-empty dict"),
    ("Rewarder weight NaN", lambda c: Rewarder({"x": len}, {"x": NAN}), TypeError, "weights['x']: expected a finite"),
    ("Advantager estimator a name", lambda c: Advantager("grpo"), TypeError, "estimator: expected a callable"),
    # --- other zoo functions and controllers ---------------------------------------------------------
    ("gae rewards as a list", lambda c: gae([[0.0, 1.0]], torch.zeros(1, 2), torch.ones(1, 2)), TypeError,
     "rewards: expected a torch.Tensor"),
    ("gae NaN values", lambda c: gae(torch.zeros(1, 2), torch.tensor([[NAN, 0.0]]), torch.ones(1, 2)), ValueError,
     "values: expected finite values"),
    ("gae shapes", lambda c: gae(torch.zeros(1, 2), torch.zeros(1, 3), torch.ones(1, 2)), ValueError,
     "rewards, values, mask: expected equal"),
    ("value loss NaN returns", lambda c: value_loss(torch.zeros(1, 2), torch.zeros(1, 2), torch.tensor([[0.0, NAN]]),
                                                    torch.ones(1, 2)), ValueError, "returns: expected finite"),
    ("value loss zero clip", lambda c: value_loss(torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1, 2),
                                                  torch.ones(1, 2), cliprange_value=0.0), ValueError,
     "cliprange_value: expected"),
    ("KL reward NaN coefficient", lambda c: kl_penalized_rewards(R(1.0), torch.zeros(1, 2), torch.zeros(1, 2),
                                                                 torch.ones(1, 2), kl_coef=NAN), ValueError,
     "kl_coef: expected a finite number"),
    ("KL reward rewards as a list", lambda c: kl_penalized_rewards([1.0], torch.zeros(1, 2), torch.zeros(1, 2),
                                                                   torch.ones(1, 2)), TypeError, "rewards: expected"),
    ("overlong lengths as a list", lambda c: overlong_penalty([3, 4], max_new_tokens=8, overlong_buffer=2), TypeError,
     "lengths: expected a torch.Tensor"),
    ("overlong negative length", lambda c: overlong_penalty(torch.tensor([-1, 4]), max_new_tokens=8, overlong_buffer=2),
     ValueError, "lengths: expected completion lengths >= 0"),
    ("overlong zero L_max", lambda c: overlong_penalty(torch.tensor([1]), max_new_tokens=0, overlong_buffer=0),
     ValueError, "max_new_tokens: expected an int >= 1"),
    ("top-K divergence NaN", lambda c: topk_divergence(torch.full((1, 2), NAN), torch.zeros(1, 2)), ValueError,
     "topk_logp: expected finite values"),
    ("top-K loss without top-K", lambda c: POLICY_LOSSES["dppo_topk_tv"](**loss_inputs()), ValueError,
     "topk_logp, old_topk_logp: DPPO top-K needs both"),
    ("top-K log-probs as a list", lambda c: POLICY_LOSSES["dppo_topk_tv"](**loss_inputs(), topk_logp=[[[0.0]]] * 2,
                                                                          old_topk_logp=torch.zeros(2, 3, 1)),
     TypeError, "topk_logp: expected a torch.Tensor"),
    ("adaptive KL zero target", lambda c: AdaptiveKLController(target=0.0, horizon=10), ValueError, "target: expected"),
    ("adaptive KL NaN observation", lambda c: AdaptiveKLController(target=0.1, horizon=10).update(NAN, 8), ValueError,
     "observed_kl: expected a finite number"),
    ("thermostat NaN entropy", lambda c: EntropyThermostat(0.5).update(NAN), ValueError, "entropy: expected a finite"),
    ("thermostat inf target", lambda c: EntropyThermostat(INF), ValueError, "target: expected a finite number"),
    # --- token ids and logits ------------------------------------------------------------------------
    ("token id past the vocabulary", lambda c: token_logprobs(torch.zeros(2, 5), torch.tensor([1, 5])), ValueError,
     "targets: expected token ids in [0, 5)"),
    ("negative token id", lambda c: chunked_token_logprobs(torch.zeros(2, 5), torch.tensor([-1, 0])), ValueError,
     "targets: expected token ids in [0, 5)"),
    ("float token ids", lambda c: token_logprobs(torch.zeros(2, 5), torch.tensor([1.0, 2.0])), TypeError,
     "targets: expected an integer"),
    ("logits as a list", lambda c: token_logprobs([[0.0] * 5], torch.tensor([1])), TypeError, "logits: expected"),
    ("completion id past the vocabulary", lambda c: rlnb.models.forward.completion_logprobs(
        c.model, c.batch.prompt_ids, c.batch.prompt_mask, c.batch.completion_ids + 1000, c.batch.mask), ValueError,
     "completion_ids: expected token ids in [0, 100)"),
    ("prompt id past the vocabulary", lambda c: sample(c.model, c.batch.prompt_ids + 100, c.batch.prompt_mask,
                                                       max_new_tokens=2, eos_token_id=2, pad_token_id=0), ValueError,
     "prompt_ids: expected token ids in [0, 100)"),
    ("prompt ids as floats", lambda c: sample(c.model, c.batch.prompt_ids.float(), c.batch.prompt_mask,
                                              max_new_tokens=2, eos_token_id=2, pad_token_id=0), TypeError,
     "prompt_ids: expected an integer"),
    ("prompt ids as a list", lambda c: sample(c.model, c.batch.prompt_ids.tolist(), c.batch.prompt_mask,
                                              max_new_tokens=2, eos_token_id=2, pad_token_id=0), TypeError,
     "prompt_ids: expected a torch.Tensor"),
    # --- the Trainer's door --------------------------------------------------------------------------
    ("seed as a float", lambda c: rlnb.Trainer(c.model, c.tok, seed=1.0), TypeError, "seed: expected an int"),
    ("seed as a bool", lambda c: rlnb.Trainer(c.model, c.tok, seed=True), TypeError, "seed: expected an int"),
    ("negative seed", lambda c: rlnb.Trainer(c.model, c.tok, seed=-1), ValueError, "seed: expected an int in [0, "),
    ("400-digit seed", lambda c: rlnb.Trainer(c.model, c.tok, seed=10**400), ValueError, "seed: expected an int in"),
    ("400-digit pool", lambda c: rlnb.Trainer(c.model, c.tok, pool_size=10**400), ValueError, "pool_size: expected"),
    ("pool as a float", lambda c: rlnb.Trainer(c.model, c.tok, pool_size=16.0), TypeError, "pool_size: expected an int"),
    ("400-digit records", lambda c: rlnb.Trainer(c.model, c.tok, keep_records=10**400), ValueError, "keep_records:"),
    ("safe_update as 1", lambda c: rlnb.Trainer(c.model, c.tok, safe_update=1), TypeError, "safe_update: expected"),
    ("reward policy None", lambda c: rlnb.Trainer(c.model, c.tok, reward_on_error=None), ValueError, "reward_on_error:"),
    ("model on the meta device", lambda c: rlnb.Trainer(meta_model(c), c.tok), ValueError,
     "model: expected loaded weights, got weights on the meta device"),
    ("model without weights", lambda c: rlnb.Trainer(torch.nn.Identity(), c.tok), TypeError, "model: expected"),
    ("model as a name", lambda c: rlnb.Trainer("gpt2", c.tok), TypeError, "model: expected a Hugging Face causal LM"),
    ("tokenizer as a name", lambda c: rlnb.Trainer(c.model, "gpt2"), TypeError, "tokenizer: expected"),
    ("reference on another device", lambda c: rlnb.Trainer(c.model, c.tok, ref_model=meta_model(c), beta=0.1),
     ValueError, "ref_model: expected loaded weights"),
    ("reference not a model", lambda c: rlnb.Trainer(c.model, c.tok, ref_model="base"), TypeError, "ref_model:"),
    ("task as a number", lambda c: rlnb.Trainer(c.model, c.tok, task=3), TypeError, "task: expected a task name"),
    ("task as a list", lambda c: rlnb.Trainer(c.model, c.tok, task=["add"]), TypeError, "task: expected a task name"),
    ("unknown recipe field", lambda c: rlnb.Trainer(c.model, c.tok, temprature=1.0), TypeError, "temprature:"),
    ("recipe as a list", lambda c: rlnb.Trainer(c.model, c.tok, recipe=["grpo"]), TypeError, "recipe: expected a recipe"),
    ("recipe as a number", lambda c: rlnb.recipes.get(3), TypeError, "recipe: expected a recipe name"),
    ("recipe as bytes", lambda c: rlnb.recipes.get(b"grpo"), TypeError, "recipe: expected a recipe name"),
    ("run steps as a float", lambda c: c.t.run(1.0, progress=False), ValueError, "steps: expected"),
    ("run steps as a bool", lambda c: c.t.run(True, progress=False), ValueError, "steps: expected"),
    ("step hook not callable", lambda c: c.t.step(callbacks=[42]), TypeError, "callbacks[0]: expected"),
    ("callbacks as a number", lambda c: c.t.run(1, callbacks=3, progress=False), TypeError, "callbacks: expected"),
    ("evaluate n as a float", lambda c: c.t.evaluate(2.0), ValueError, "n: expected a positive int"),
    ("evaluate k with greedy", lambda c: c.t.evaluate(2, k=4), ValueError, "k: pass@k needs sampling"),
    # --- tasks: parameters that cannot work, never a hang -----------------------------------------
    ("countdown max_target 0", lambda c: tasks.get("countdown", max_target=0).dataset(1), ValueError,
     "max_target: expected an int in [1, "),
    ("countdown unreachable target", lambda c: tasks.get("countdown", max_target=1), ValueError,
     "max_target: only"),
    ("countdown huge numbers", lambda c: tasks.get("countdown", max_number=10**8, max_target=5), ValueError,
     "max_target: only"),
    ("countdown numbers past the parser", lambda c: tasks.get("countdown", max_number=10**10), ValueError,
     "max_number: expected an int in [1, 999999999]"),
    ("countdown one number", lambda c: tasks.get("countdown", n_numbers=1), ValueError, "n_numbers: expected an int in [2, 6]"),
    ("countdown numbers as a float", lambda c: tasks.get("countdown", n_numbers=3.0), TypeError, "n_numbers: expected an int"),
    ("countdown zero max number", lambda c: tasks.get("countdown", max_number=0), ValueError, "max_number: expected"),
    ("add 0 digits", lambda c: tasks.get("add", digits=0), ValueError, "digits: expected an int in [1, 9]"),
    ("add 400-digit digits", lambda c: tasks.get("add", digits=10**400), ValueError, "digits: expected an int in [1, 9]"),
    ("add digits as a string", lambda c: tasks.get("add", digits="3"), TypeError, "digits: expected an int"),
    ("add NaN scratch share", lambda c: tasks.get("add", p_scratch=NAN), ValueError, "p_scratch: expected a finite"),
    ("add scratch share 2", lambda c: tasks.get("add", p_scratch=2.0), ValueError, "p_scratch: expected a finite number in [0, 1]"),
    ("misspelt task parameter", lambda c: tasks.get("add", digts=2), TypeError,
     "digts: task 'add' has no parameter 'digts'"),
    ("parameters for a built task", lambda c: tasks.get(tasks.get("add"), digits=2), TypeError, "digits: parameters go"),
    ("task name as bytes", lambda c: tasks.get(b"add"), TypeError, "task: expected a task name"),
    ("dataset of 0 rows", lambda c: tasks.get("add").dataset(0), ValueError, "n: expected an int in [1, "),
    ("dataset of True rows", lambda c: tasks.get("add").dataset(True), TypeError, "n: expected an int"),
    ("dataset of 400-digit rows", lambda c: tasks.get("countdown").dataset(10**400), ValueError, "n: expected"),
    ("dataset of 2.5 rows", lambda c: tasks.get("add").dataset(2.5), TypeError, "n: expected an int"),
    ("dataset seed as a list", lambda c: tasks.get("add").dataset(2, seed=[1]), TypeError, "seed: expected an int or"),
    ("dataset seed as a float", lambda c: tasks.get("countdown").dataset(2, seed=1.5), TypeError, "seed: expected"),
    ("gsm8k rows of 0", lambda c: tasks.get("gsm8k").dataset(0), ValueError, "n: expected an int"),
    ("noisy inf sigma", lambda c: tasks.noisy("add", sigma_sample=INF), ValueError, "sigma_sample: expected a finite"),
    ("noisy negative sigma", lambda c: tasks.noisy("add", sigma_shared=-1.0), ValueError, "sigma_shared: expected"),
    ("noisy sigma as a string", lambda c: tasks.noisy("add", sigma_shared="0.1"), TypeError, "sigma_shared: expected"),
    ("noisy seed as a float", lambda c: tasks.noisy("add", seed=0.5), TypeError, "seed: expected an int"),
    ("noisy unknown task", lambda c: tasks.noisy("chess"), KeyError, "task: unknown task 'chess'"),
    ("noisy state garbage", lambda c: tasks.noisy("add").set_state({"rng": "x"}), ValueError, "state: expected"),
    ("plain task given a state", lambda c: tasks.get("add").set_state({"rng": 1}), ValueError, "state: task 'add'"),
    ("task spec garbage", lambda c: tasks.from_spec(["add"]), ValueError, "task: expected a task spec"),
    ("task spec unknown wrapper", lambda c: tasks.from_spec({"name": "x", "wrap": "zip", "task": {}}), ValueError,
     "task: unknown task wrapper 'zip'"),
    # --- data files: name the file and the line ------------------------------------------------------
    ("gsm8k missing file", lambda c: tasks.get("gsm8k", source="/no/such/data.jsonl"), FileNotFoundError,
     "source: no such file /no/such/data.jsonl"),
    ("gsm8k torn line", lambda c: tasks.get("gsm8k", source=torn_file(c.tmp, GOOD_LINE * 2 + '{"question": "x", "ans')),
     ValueError, "source: "),
    ("gsm8k not an object", lambda c: tasks.get("gsm8k", source=torn_file(c.tmp, GOOD_LINE + "[1, 2]\n")), ValueError,
     "source: "),
    ("gsm8k missing answer", lambda c: tasks.get("gsm8k", source=torn_file(c.tmp, '{"question": "x"}\n')), ValueError,
     "source: "),
    ("gsm8k answer as a number", lambda c: tasks.get("gsm8k", source=torn_file(c.tmp, '{"question": "x", "answer": 5}\n')),
     ValueError, "source: "),
    ("gsm8k answer without a number", lambda c: tasks.get("gsm8k", source=torn_file(
        c.tmp, '{"question": "x", "answer": "no idea"}\n')), ValueError, "source: "),
    ("gsm8k empty file", lambda c: tasks.get("gsm8k", source=torn_file(c.tmp, "\n\n")), ValueError, "source: "),
    ("gsm8k not UTF-8", lambda c: tasks.get("gsm8k", source=torn_file(c.tmp, b"\xff\xfe\x00garbage")), ValueError,
     "source: "),
    ("gsm8k a folder", lambda c: tasks.get("gsm8k", source=c.tmp / "folder.jsonl"), ValueError, "source: expected a .jsonl file"),
    ("gsm8k source as a number", lambda c: tasks.get("gsm8k", source=5), TypeError, "source: expected"),
    ("gsm8k empty split", lambda c: tasks.get("gsm8k", split=""), TypeError, "split: expected a non-empty string"),
    ("gsm8k csv file", lambda c: tasks.get("gsm8k", source=c.tmp / "data.csv").dataset(2), ValueError,
     "source: expected a .jsonl file"),
    # --- models and devices --------------------------------------------------------------------------
    ("device that does not exist", lambda c: check_device("device", "cuda:7"), ValueError, "device: "),
    ("device with a typo", lambda c: check_device("device", "cdua"), ValueError, "device: expected 'cpu', 'cuda'"),
    ("device as a number list", lambda c: check_device("device", [0]), ValueError, "device: expected"),
    ("device tpu", lambda c: check_device("device", "xla"), ValueError, "device: "),
    ("from_pretrained on a missing GPU", lambda c: rlnb.Trainer.from_pretrained(str(rlnb.models.DEFAULT_DIR),
                                                                                device="cuda:7"), ValueError, "device: "),
    ("from_pretrained bad dtype", lambda c: rlnb.Trainer.from_pretrained(str(rlnb.models.DEFAULT_DIR), dtype="float8"),
     ValueError, "dtype: expected one of"),
    ("load a missing model", lambda c: rlnb.load("/no/such/model"), OSError, "model: cannot load '/no/such/model'"),
]


def _needs_tmp(name):
    return name.startswith(("gsm8k torn", "gsm8k not", "gsm8k missing answer", "gsm8k answer", "gsm8k empty",
                            "gsm8k a folder", "gsm8k csv"))


CASES = GENERATED + WRITTEN
TRAINER_ROWS = {name for name, *_ in WRITTEN}  # rows that may touch the module's trainer: checked in full


@pytest.fixture(scope="module")
def before(ctx):
    return fingerprint(ctx.t), digest(vars(ctx.batch))


@pytest.mark.parametrize("name, call, exc, message", CASES, ids=[c[0] for c in CASES])
def test_hostile_input_is_refused_by_name_and_changes_nothing(ctx, before, tmp_path, name, call, exc, message):
    ctx.tmp = tmp_path
    if _needs_tmp(name):
        (tmp_path / "folder.jsonl").mkdir()
        (tmp_path / "data.csv").write_text("question,answer\n")
    rng = torch.get_rng_state()
    with pytest.raises(exc) as info:
        call(ctx)
    text = str(info.value.args[0]) if info.value.args else str(info.value)
    arg = re.match(r"^([\w.\-\[\]', ]+?): ", text)
    assert arg, f"the message does not start with an argument's name: {text}"
    assert text.startswith(message), f"{message!r} is not how {text!r} starts"
    assert "expected" in text or "unknown" in text or "needs" in text or "only" in text or "no " in text \
        or "cannot" in text or "parameters go" in text, text
    assert torch.equal(torch.get_rng_state(), rng)                    # no random stream was touched
    if name in TRAINER_ROWS:
        assert (fingerprint(ctx.t), digest(vars(ctx.batch))) == before


def test_the_table_is_hostile_and_large():
    assert len(CASES) >= 300 and len({c[0] for c in CASES}) == len(CASES)
    assert len(GENERATED) >= 200 and len(WRITTEN) >= 120


def test_registry_entries_leave_their_inputs_alone():
    """A refused call changes none of its inputs (every generated row builds fresh ones; here, the same
    tensors are handed twice and must hash the same before and after)."""
    kw = loss_inputs()
    kw["adv"] = R(NAN, 1.0)
    snap = digest(kw)
    for fn in POLICY_LOSSES.values():
        with pytest.raises(ValueError):
            fn(**with_topk(fn, kw))
    assert digest(kw) == snap


def test_after_the_table_the_trainer_steps_like_an_untouched_twin(ctx):
    twin = rlnb.Trainer.tiny("grpo", task="add", seed=0, prompts_per_step=2, num_generations=2, max_new_tokens=8,
                             pool_size=16)
    twin.run(1, progress=False)
    strip = lambda h: {k: v for k, v in h.items() if not k.startswith("timing/")}  # noqa: E731
    assert strip(ctx.t.step().metrics) == strip(twin.step().metrics)
