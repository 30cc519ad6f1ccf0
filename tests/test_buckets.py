"""The bucketed forward (rows by length, padding cut) and the shared-prompt forward (each distinct prompt once,
completions bucketed) give the padded forward's numbers.

On fixed sampled batches with ragged prompts and completions (fp64), large enough to make several buckets:
the loss, every per-token tensor the widgets read (log-probs, entropy, ratio, weight, values) and every
parameter's gradient, for token-mean and seq-mean-token-mean aggregation, with and without the critic.
"""

import functools

import pytest
import torch

import rlnb
from rlnb.models import buckets as Bk
from rlnb.models import forward as F
from rlnb.models import shared_prompt as SP

SIZE = dict(prompts_per_step=6, num_generations=8, max_new_tokens=12)  # 48 rows: up to four buckets


@functools.cache
def sampled(critic: bool):
    """A fp64 trainer and one advantaged batch whose old log-probs are moved so the ratio clips."""
    kw = dict(recipe="ppo", critic=True) if critic else dict(recipe="grpo")
    t = rlnb.Trainer.tiny(task="countdown", seed=1, entropy_coef=0.01, **kw, **SIZE)
    t.model.double()  # the value head stays fp32: it reads hidden.float() (bf16 models), so critic runs are fp32-exact
    batch = t.advantager.step(t.rollout())
    gen = torch.Generator().manual_seed(3)
    old = batch.old_logp + 0.3 * torch.randn(batch.old_logp.shape, generator=gen, dtype=batch.old_logp.dtype)
    return t, batch.replace(old_logp=old * batch.mask)


def run(t, batch, mode: str):
    """Loss, per-token tensors and gradients with the forward in ``mode``."""
    with Bk.padding(mode):
        t.model.zero_grad(set_to_none=True)
        if t.value_head is not None:
            t.value_head.zero_grad(set_to_none=True)
        res = t.updater.loss(batch)
        res.total.backward()
        values = t.updater.policy(batch).values
    params = [*t.model.parameters(), *(t.value_head.parameters() if t.value_head is not None else [])]
    tokens = {"ratio": res.out.ratio, "weight": res.out.weight, "entropy": res.entropy,
              "loss_per_token": res.out.loss, "values": values}
    return res.total.detach(), tokens, [p.grad.clone() for p in params if p.grad is not None]


@pytest.mark.parametrize("mode", ["shared", "bucketed"])
@pytest.mark.parametrize("critic", [False, True], ids=["no critic", "critic"])
@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_fast_forwards_loss_tokens_and_gradients_equal_the_padded_reference(agg, critic, mode, monkeypatch):
    t, batch = sampled(critic)
    calls = []
    real = SP.shared_hidden
    monkeypatch.setattr(SP, "shared_hidden", lambda *a: calls.append(1) or real(*a))
    assert real(t.model.get_decoder(), batch.prompt_ids, batch.prompt_mask, batch.completion_ids,
                batch.mask) is not None                                    # the shared path really runs here
    t.updater.agg_fn = rlnb.algos.AGGREGATIONS[agg]
    lp, lc = Bk.real_lengths(batch.prompt_mask, batch.mask)
    assert lp.min() < lp.max() and lc.min() < lc.max()                       # ragged both ways
    cut = Bk.buckets(batch.prompt_mask, batch.mask)
    assert len(cut) >= 2 and any(wc < batch.mask.shape[1] for _, _, wc in cut)  # padding really is cut
    (a_loss, a_tok, a_grad), (b_loss, b_tok, b_grad) = run(t, batch, mode), run(t, batch, "padded")
    assert bool(calls) == (mode == "shared")
    assert a_loss.abs() > 0
    tol = dict(rtol=1e-5, atol=1e-6) if critic else dict(rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(a_loss, b_loss, **tol)
    m = batch.mask.bool()
    for name, a in a_tok.items():
        b = b_tok[name]
        if name == "values":
            assert (a is None) == (not critic) and (b is None) == (not critic)
            if a is None:
                continue
        torch.testing.assert_close(a[m], b[m], **tol, msg=lambda s, name=name: f"{name}: {s}")
        assert (a[~m] == 0).all() or name in ("ratio", "weight", "loss_per_token")  # the loss masks these
    assert len(a_grad) == len(b_grad) > 0
    scale = max(float(g.abs().max()) for g in b_grad)
    assert scale > 0
    # The shared path sums the G rows' gradients into their one prompt before the backward runs through the
    # prompt, and transformers' RMSNorm computes in fp32 even in an fp64 model: the sums round at fp32 there
    # (measured 3e-7 of the largest gradient). A prompt cache cut from the graph would be off by O(1).
    g_tol = dict(rtol=1e-5, atol=1e-5 * scale) if mode == "shared" else dict(rtol=tol["rtol"] * 10,
                                                                              atol=tol["atol"] * scale)
    for ga, gb in zip(a_grad, b_grad):
        torch.testing.assert_close(ga, gb, **g_tol)


def test_buckets_cover_every_row_once_at_widths_that_hold_its_tokens():
    _, batch = sampled(False)
    lp, lc = Bk.real_lengths(batch.prompt_mask, batch.mask)
    cut = Bk.buckets(batch.prompt_mask, batch.mask)
    rows = torch.cat([r for r, _, _ in cut])
    assert sorted(rows.tolist()) == list(range(batch.B))
    for r, wp, wc in cut:
        assert (lp[r] <= wp).all() and (lc[r] <= wc).all() and wp == lp[r].max() and wc == lc[r].max()
        assert len(r) >= Bk.MIN_ROWS                                          # a bucket pays for its call
    few = 2 * Bk.MIN_ROWS - 1
    assert len(Bk.buckets(batch.prompt_mask[:few], batch.mask[:few])) == 1
    share = Bk.padded_share(batch.prompt_mask, batch.mask)
    assert 0 < share["padded"] < share["bucketed"] <= 1


def test_real_lengths_by_hand():
    prompt_mask = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1], [0, 0, 0, 1]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1]])
    lp, lc = Bk.real_lengths(prompt_mask, mask)
    assert lp.tolist() == [2, 4, 1] and lc.tolist() == [2, 1, 3]


def test_padding_mode_rejects_unknown_names_and_restores():
    with pytest.raises(ValueError, match="mode: expected one of"):
        with Bk.padding("packed"):
            pass
    with Bk.padding("padded"):
        assert not Bk.bucketing() and Bk.padding_mode() == "padded"
    assert Bk.bucketing() and Bk.padding_mode() == "shared"


def test_the_reference_lm_head_path_is_untouched_by_bucketing():
    """The full-logits reference path (the model's own forward) never buckets: it stays the oracle."""
    t, batch = sampled(False)
    inputs = (batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.mask)
    with F.lm_head_path("reference"):
        a = F.completion_logprobs(t.model, *inputs)
        with Bk.padding("padded"):
            b = F.completion_logprobs(t.model, *inputs)
    assert torch.equal(a.logp, b.logp)


def test_split_sizes_beats_equal_counts_and_matches_brute_force():
    """The cut minimises sum(run size x longest): never worse than equal counts, equal to trying every cut."""
    import itertools

    gen = torch.Generator().manual_seed(0)
    cost = lambda xs, sizes: sum(n * xs[sum(sizes[:i + 1]) - 1] for i, n in enumerate(sizes))  # noqa: E731
    for _ in range(20):
        xs = sorted(torch.randint(1, 30, (24,), generator=gen).tolist())
        sizes = Bk.split_sizes(xs, 3, 4)
        assert sum(sizes) == 24 and min(sizes) >= 4 and len(sizes) <= 3
        brute = min(cost(xs, [a, b - a, 24 - b]) for a, b in itertools.combinations(range(4, 21), 2)
                    if b - a >= 4 and 24 - b >= 4 and xs[a - 1] != xs[a] and xs[b - 1] != xs[b])
        assert cost(xs, sizes) <= min(brute, cost(xs, [8, 8, 8]), cost(xs, [24]))
