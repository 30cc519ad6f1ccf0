"""The update's rows as parallel parts (rlnb.models.row_split) against one call over the batch (rows="whole").

Not timed (``python -m rlnb.bench step`` and scripts/bench_vs_trl.py time it): these check that the split
computes what one call computes, on fixed batches, for the loss, the gradients of every weight and a step.
"""

import threading

import pytest
import torch

import rlnb
from rlnb.core.forward_options import ForwardOptions, using
from rlnb.models import row_split

SMALL = dict(prompts_per_step=4, num_generations=4, max_new_tokens=16)




def staged(trainer):
    b = trainer.advantager.step(trainer.rewarder.step(trainer.sampler.step(trainer.next_prompts())))
    return b.replace(adv=torch.linspace(-1.5, 1.5, b.B))                # signed advantages: a gradient


def loss_and_grads(trainer, batch, **options):
    """The Updater's own backward (split: each part's backward on its thread) under the forward ``options``."""
    u = trainer.updater
    params = [p for g in u.optimizer.param_groups for p in g["params"]]
    u.optimizer.zero_grad(set_to_none=True)
    with using(**options):
        res = u.loss(batch)
        if res.parts is None:
            res.total.backward()
        else:
            row_split.backward(res.total, res.parts, params)
    return res, [None if p.grad is None else p.grad.clone() for p in params]


@pytest.mark.parametrize("recipe,extra", [("grpo", {}), ("ppo", {}), ("dppo", dict(loss="dppo_topk_tv", topk_logprobs=4)),
                                          ("dr_grpo", {})])
def test_split_loss_and_gradients_equal_one_call(two_threads, recipe, extra):
    t = rlnb.Trainer.tiny(recipe, **SMALL, **extra)
    batch = staged(t)
    t.model.train()
    whole, g_whole = loss_and_grads(t, batch, rows="whole")
    split, g_split = loss_and_grads(t, batch, rows="split")
    assert whole.parts is None and split.parts is not None and len(split.parts) == row_split.PARTS
    assert [p.logp.shape[0] for p in split.parts] == [batch.B // 2, batch.B // 2]   # whole groups
    torch.testing.assert_close(split.total, whole.total, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(split.entropy, whole.entropy, rtol=1e-5, atol=1e-6)
    assert len(g_whole) > 0 and all(g is not None for g in g_whole)
    for a, b in zip(g_split, g_whole):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    assert sum(float(g.abs().sum()) for g in g_whole) > 0


def test_the_trainer_step_takes_the_split_and_matches_one_call(two_threads, monkeypatch):
    records, calls = {}, []
    real = row_split.backward
    monkeypatch.setattr(row_split, "backward", lambda *a, **k: calls.append(1) or real(*a, **k))
    for rows in ("whole", "split"):
        t = rlnb.Trainer.tiny("grpo", **SMALL, forward=ForwardOptions(rows=rows))
        before = len(calls)
        records[rows] = [t.step() for _ in range(2)]
        assert len(calls) - before == (2 if rows == "split" else 0)
    for w, s in zip(records["whole"], records["split"]):
        assert torch.equal(w.batch.completion_ids, s.batch.completion_ids)    # the same samples after one update
        assert s.metrics["grad_norm"] == pytest.approx(w.metrics["grad_norm"], rel=1e-5)
        assert s.metrics["loss"] == pytest.approx(w.metrics["loss"], rel=1e-5, abs=1e-7)
    assert torch.get_num_threads() == 2                                     # the split put the setting back


def test_parts_fall_back_to_one_call_where_the_split_cannot_hold(two_threads):
    model, _ = rlnb.load_default()
    cpu = torch.device("cpu")
    got = row_split.parts(model, 16, 4, cpu, "split")
    assert [r.tolist() for r in got] == [list(range(8)), list(range(8, 16))]
    assert row_split.parts(model, 16, 4, cpu, "whole") is None
    assert row_split.parts(model, 4, 4, cpu, "split") is None                 # one group
    assert row_split.parts(model, 15, 4, cpu, "split") is None                # not whole groups
    with torch.no_grad():
        assert row_split.parts(model, 16, 4, cpu, "split") is None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert row_split.parts(model, 16, 4, cpu, "split") is None
    handle = model.model.layers[0].register_forward_hook(lambda *a: None)
    assert row_split.parts(model, 16, 4, cpu, "split") is None                # a hook would see each part
    handle.remove()
    handle = next(model.parameters()).register_hook(lambda g: g)
    assert row_split.parts(model, 16, 4, cpu, "split") is None
    handle.remove()
    torch.set_num_threads(1)
    assert row_split.parts(model, 16, 4, cpu, "split") is None                # one thread: nothing to split
    torch.set_num_threads(2)
    assert row_split.parts(model, 16, 4, cpu, "split") is not None


def test_a_part_that_fails_raises_here_after_every_part_finished(two_threads):
    finished = []

    def work(i):
        if i == 1:
            raise ValueError("part 1 failed")
        threading.Event().wait(0.05)
        finished.append((i, torch.get_num_threads()))
        return i

    with pytest.raises(ValueError, match="part 1 failed"):
        row_split.run(work, [0, 1])
    assert finished == [(0, 1)]                       # the first part ran on one intra-op thread, to its end
    assert torch.get_num_threads() == 2
    assert row_split.run(lambda i: (i, torch.get_num_threads()), [0, 1]) == [(0, 1), (1, 1)]


def test_a_part_that_splits_again_runs_its_items_in_turn(two_threads):
    inner = lambda i: (i, threading.current_thread().name)  # noqa: E731
    out = row_split.run(lambda i: row_split.run(inner, [10 * i, 10 * i + 1]), [0, 1])
    assert [x for x, _ in out[0]] == [0, 1] and [x for x, _ in out[1]] == [10, 11]
    names = {name for _, name in out[1]}
    assert len(names) == 1 and names.pop().startswith(row_split.POOL_NAME)   # both in turn on the pool's thread


def test_rows_is_a_forward_option_with_a_clear_error():
    assert ForwardOptions().rows == "split"
    with pytest.raises(ValueError, match=r"rows: expected one of \('split', 'whole'\)"):
        ForwardOptions(rows="halves")
