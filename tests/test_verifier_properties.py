"""Property tests (hypothesis).

Verifiers and answer extractors on arbitrary, grammar-shaped, huge and hostile strings: they never raise,
never hang (a generous per-example deadline), never execute anything, and safe_math computes what an
independent evaluator of the same expression tree computes. Advantage estimators and aggregations on
arbitrary finite inputs: finite outputs and their group invariants.
"""

import builtins
import contextlib
import math
import os
import subprocess
from datetime import timedelta
from fractions import Fraction

import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rlnb import tasks
from rlnb.algos import ADVANTAGES, AGGREGATIONS, extra_inputs, hyper_names
from rlnb.tasks.base import Reward
from rlnb.tasks.gsm8k import final_number
from rlnb.tasks.safe_math import MAX_DEPTH, MAX_DIGITS, parse_expr

TASKS = {name: tasks.get(name) for name in ("add", "countdown", "gsm8k")}
ANSWERS = {"add": "579", "countdown": "3 7 25=46", "gsm8k": "18"}
VERIFY = settings(max_examples=150, deadline=timedelta(seconds=2), suppress_health_check=[HealthCheck.too_slow])
F64 = torch.float64

GRAMMAR = "0123456789+-*/() "
arbitrary = st.text(max_size=300)
grammar_shaped = st.text(alphabet=GRAMMAR + ">=;#.,x\n", max_size=300)
huge = st.builds(lambda piece, n: piece * n, st.text(alphabet=GRAMMAR + "9>#", min_size=1, max_size=8),
                 st.integers(1_000, 50_000))
nested = st.builds(lambda d, core: "(" * d + core + ")" * d, st.integers(0, 5_000), st.sampled_from(["1", "1+2", ""]))
hostile = st.sampled_from([
    "__import__('os').system('touch {s}')", "exec(\"open('{s}','w')\")", "eval('1+1')", "lambda: open('{s}')",
    "().__class__.__bases__[0].__subclasses__()", "9" * 100_000, "1e999999", "2**2**2**2**2", "\x00" * 5000,
])
any_text = st.one_of(arbitrary, grammar_shaped, huge, nested, hostile)


def _canary(*args, **kwargs):
    raise AssertionError("a verifier tried to execute code")


@contextlib.contextmanager
def nothing_may_run():
    """eval, exec, compile, os.system and subprocess are booby-trapped while a verifier runs."""
    saved = (builtins.eval, builtins.exec, builtins.compile, os.system, subprocess.Popen)
    builtins.eval = builtins.exec = builtins.compile = os.system = subprocess.Popen = _canary
    try:
        yield
    finally:
        builtins.eval, builtins.exec, builtins.compile, os.system, subprocess.Popen = saved


@VERIFY
@given(text=any_text, name=st.sampled_from(sorted(TASKS)))
def test_verifiers_never_raise_never_execute_and_score_in_range(tmp_path_factory, text, name):
    sentinel = tmp_path_factory.getbasetemp() / "executed"
    text = text.replace("{s}", str(sentinel))
    task = TASKS[name]
    with nothing_may_run():
        got = task.extract(text[:5000])
        reward = task.reward(text, ANSWERS[name])
        ok = task.is_well_formed(text[:5000])
    assert got is None or isinstance(got, str)
    assert isinstance(reward, Reward) and isinstance(ok, bool)
    assert reward.parts["correct"] in (0.0, 1.0) and reward.parts["format"] in (0.0, 1.0)
    assert math.isfinite(reward.reward) and 0.0 <= reward.reward <= 1.0 + task.format_weight
    assert not sentinel.exists()


@VERIFY
@given(text=any_text)
def test_extractors_never_raise(text):
    with nothing_may_run():
        expr, number = parse_expr(text), final_number(text)
    assert expr is None or (isinstance(expr[0], Fraction) and all(isinstance(n, int) for n in expr[1]))
    assert number is None or (isinstance(number, str) and len(number) <= 64)


# --- safe_math against an independent evaluator of random expression trees ---------------------------

def trees(depth=0):
    leaf = st.integers(0, 10**MAX_DIGITS - 1)
    if depth >= 4:
        return leaf
    node = st.tuples(st.sampled_from("+-*/"), st.deferred(lambda: trees(depth + 1)), st.deferred(lambda: trees(depth + 1)))
    return st.one_of(leaf, node)


def render(tree, parent_op=None, right=False):
    """Text of ``tree`` with parentheses only where precedence and left associativity need them."""
    if isinstance(tree, int):
        return str(tree)
    op, a, b = tree
    text = render(a, op) + op + render(b, op, right=True)
    rank = {"+": 0, "-": 0, "*": 1, "/": 1}
    if parent_op and (rank[op] < rank[parent_op] or (right and rank[op] == rank[parent_op])):
        text = "(" + text + ")"
    return text


def value(tree):
    """Exact value by direct recursion over the tree (None on division by zero): the oracle."""
    if isinstance(tree, int):
        return Fraction(tree)
    op, a, b = tree
    x, y = value(a), value(b)
    if x is None or y is None or (op == "/" and y == 0):
        return None
    if op == "/":
        return x / y
    return x + y if op == "+" else x - y if op == "-" else x * y


def leaves(tree):
    return [tree] if isinstance(tree, int) else leaves(tree[1]) + leaves(tree[2])


@settings(max_examples=300, deadline=timedelta(seconds=2))
@given(tree=trees())
def test_safe_math_equals_the_tree_oracle(tree):
    text = render(tree)
    assume(len(text) <= 64)                                             # longer text is refused by design
    parsed = parse_expr(text)
    nesting = max((text[: i + 1].count("(") - text[: i + 1].count(")") for i in range(len(text))), default=0)
    if value(tree) is None or nesting > MAX_DEPTH:
        assert parsed is None
    else:
        assert parsed == (value(tree), leaves(tree))


# --- advantages: finite outputs and group invariants on arbitrary finite rewards ---------------------

rewards = st.lists(st.floats(-1e3, 1e3, allow_nan=False, width=64), min_size=12, max_size=12)
G_values = st.sampled_from([2, 3, 4, 6, 12])
CENTRED = ["reinforce_baseline", "grpo", "dr_grpo", "rloo", "batch_norm"]   # maxrl needs r >= 0: below
TOKEN_BASELINES = ["optimal_token_baseline", "tir_optimal_token_baseline"]  # equal path weights at t = 0: centred


@settings(max_examples=80, deadline=None)
@given(r=rewards, G=G_values, name=st.sampled_from(sorted(ADVANTAGES)))
def test_advantages_are_finite_and_centred_ones_sum_to_zero_per_group(r, G, name):
    r = torch.tensor(r, dtype=F64)
    if name == "maxrl":
        r = r.abs()
    lengths = 1 + torch.arange(12) % 5                                 # for the entries that take lengths
    mask = (torch.arange(5) < lengths[:, None]).to(F64)
    extras = {"lengths": lengths, "greedy_rewards": r.roll(1), "reward_parts": {"a": r, "b": r.roll(2)},
              "reward_weights": None, "mask": mask, "old_logp": mask * -0.7, "sum_pi_squared": mask * 0.4,
              "prefix_values": r.roll(2), "rollout_is_weights": mask * 1.5}  # (B,): V(prompt)
    adv = ADVANTAGES[name](r, G, **{k: extras[k] for k in extra_inputs(ADVANTAGES[name])})
    if adv.dim() == 2:                                                 # per-token: A_{i,t} on row i's valid tokens
        assert (adv[mask == 0] == 0).all()
        adv = adv[:, 0]
    assert adv.shape == r.shape and torch.isfinite(adv).all()
    scale = 1 + adv.abs().max()
    if name in CENTRED or name in ("maxrl",) or name in TOKEN_BASELINES or (name == "gpg" and G > 1):
        # gpg with G = 1 follows verl: mean 0, A = alpha r (not centred)
        tol = 1e-7 if name in TOKEN_BASELINES else 1e-9                 # their eps = 1e-8 against W ~ 0.4
        assert (adv.view(-1, G).sum(-1).abs() <= tol * G * scale).all()
    elif name == "opo":                                                # the length-weighted sum is what vanishes
        assert ((lengths * adv).view(-1, G).sum(-1).abs() <= 1e-9 * 5 * G * scale).all()
    elif name == "grpo_passk":                                         # pass@k never pushes a sample down
        assert (adv >= 0).all()


@settings(max_examples=80, deadline=None)
@given(r=rewards, G=G_values, shift=st.floats(-1e3, 1e3), name=st.sampled_from(CENTRED),
       perm_seed=st.integers(0, 2**31))
def test_shift_invariance_and_permutation_equivariance(r, G, shift, name, perm_seed):
    r = torch.tensor(r, dtype=F64)
    adv = ADVANTAGES[name](r, G)
    torch.testing.assert_close(ADVANTAGES[name](r + shift, G), adv, atol=1e-6 * (1 + adv.abs().max()), rtol=1e-6)
    g = torch.Generator().manual_seed(perm_seed)                      # shuffle within each group
    perm = torch.stack([torch.randperm(G, generator=g) + G * i for i in range(len(r) // G)]).flatten()
    torch.testing.assert_close(ADVANTAGES[name](r[perm], G), adv[perm])


@settings(max_examples=80, deadline=None)
@given(r=st.lists(st.integers(0, 10), min_size=12, max_size=12), G=G_values, c=st.floats(0.5, 100))
def test_grpo_is_scale_invariant(r, G, c):
    """A(c r) = A(r) for c > 0 up to eps / std (integer rewards: a non-constant group has std >= 0.2)."""
    r = torch.tensor(r, dtype=F64)
    torch.testing.assert_close(ADVANTAGES["grpo"](c * r, G), ADVANTAGES["grpo"](r, G), atol=1e-4, rtol=1e-4)


# --- aggregations ----------------------------------------------------------------------------------

@st.composite
def loss_and_mask(draw):
    G, P, T = draw(st.sampled_from([1, 2, 4])), draw(st.integers(1, 3)), draw(st.integers(1, 6))
    B = G * P
    loss = torch.tensor(draw(st.lists(st.floats(-1e4, 1e4, allow_nan=False), min_size=B * T, max_size=B * T)),
                        dtype=F64).view(B, T)
    lengths = draw(st.lists(st.integers(0, T), min_size=B, max_size=B))   # 0: a dropped row
    mask = (torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]).to(F64)
    return loss, mask, G, draw(st.integers(0, 2**31))


def aggregate(name, loss, mask, G):
    fn = AGGREGATIONS[name]
    kw = {"group_size": G, "max_new_tokens": loss.shape[1] + 2}
    return fn(loss, mask, **{k: v for k, v in kw.items() if k in hyper_names(fn)})


@settings(max_examples=100, deadline=None)
@given(data=loss_and_mask(), name=st.sampled_from(sorted(AGGREGATIONS)), c=st.floats(-10, 10))
def test_aggregations_are_finite_linear_and_blind_to_row_and_group_order(data, name, c):
    loss, mask, G, seed = data
    value = aggregate(name, loss, mask, G)
    assert value.dim() == 0 and torch.isfinite(value)
    torch.testing.assert_close(aggregate(name, c * loss, mask, G), c * value, atol=1e-6 * (1 + abs(c) * 1e4), rtol=1e-9)
    g = torch.Generator().manual_seed(seed)
    P = loss.shape[0] // G
    groups = torch.randperm(P, generator=g)                            # shuffle groups, and rows within them
    rows = torch.cat([torch.randperm(G, generator=g) + G * int(p) for p in groups])
    torch.testing.assert_close(aggregate(name, loss[rows], mask[rows], G), value, atol=1e-9 * (1 + value.abs()), rtol=1e-9)
