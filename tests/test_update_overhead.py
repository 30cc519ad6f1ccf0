"""The update's overhead (issue 46): the fused AdamW against the plain loop, and the benchmark's profile and
per-stage arithmetic lines. Not timed (speed lives in scripts/bench_vs_trl.py)."""

import copy

import torch

import rlnb
from rlnb.bench import vs_trl
from rlnb.bench.update_profile import PHASES, profile_update
from rlnb.stages.optim import make_optimizer


def test_make_optimizer_takes_the_fused_adamw_and_steps_like_the_plain_loop():
    """The fused kernel is AdamW's arithmetic in one call per parameter: after a few steps on the same gradients
    the weights equal the plain loop's to rounding."""
    model, _ = rlnb.load_default()
    twin = copy.deepcopy(model)
    fused, _ = make_optimizer(model, lr=1e-2, weight_decay=0.1)
    plain = torch.optim.AdamW(twin.parameters(), lr=1e-2, weight_decay=0.1, foreach=False)
    assert fused.defaults["fused"] and not plain.defaults.get("fused")
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        grads = [torch.randn(p.shape, generator=gen) for p in model.parameters()]
        for m, opt in ((model, fused), (twin, plain)):
            for p, g in zip(m.parameters(), grads):
                p.grad = g.clone()
            opt.step()
    moved = 0.0
    for (name, a), b, c in zip(model.named_parameters(), twin.parameters(), rlnb.load_default()[0].parameters()):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6, msg=name)
        moved = max(moved, float((a - c).detach().abs().max()))
    assert moved > 1e-2                                                  # the steps really changed the weights


def test_the_update_profile_names_every_phase_and_leaves_the_trainer_as_it_was():
    t = rlnb.Trainer.tiny("grpo", prompts_per_step=2, num_generations=4, max_new_tokens=8)
    policy = t.updater.policy
    text = profile_update(t, repeats=1, top=5)
    for phase in PHASES:
        assert f"  {phase} " in text, phase
    assert "aten::mm" in text and "matmul operators:" in text
    assert t.updater.policy == policy and "policy" not in vars(t.updater)  # the label wrapper is gone
    steps = {float(st["step"]) for st in t.updater.optimizer.state.values()}
    assert steps == {2.0}                                                # warm-up + 1 profiled: real optimizer steps


def test_arithmetic_line_by_hand():
    steps = [{"generate": 0.2, "update_forward": 0.1, "update_other": 0.4}, {"generate": 0.4, "update_forward": 0.1,
                                                                             "update_other": 0.4}]
    line = vs_trl.arithmetic_line("rlnb", steps, [1e9, 1e9], rate=1e10)     # one forward: 0.1 s at the rate
    # generate: median 0.3 s vs 0.1 s (0.33); the forward 0.1 vs 0.1 (1.00); backward two forwards: 0.4 vs 0.2
    assert "generate 0.300 vs 0.100 (0.33)" in line and "update_forward 0.100 vs 0.100 (1.00)" in line
    assert "update_other 0.400 vs 0.200 (0.50)" in line and "loss_forward" not in line
    assert vs_trl.cpu_model()


def test_the_profile_counts_the_operators_of_both_row_parts(two_threads):
    from torch.profiler import ProfilerActivity, profile

    from rlnb.bench.update_profile import _all_threads
    from rlnb.models import row_split

    a = torch.randn(16, 16)
    work = lambda i: [torch.mm(a, a) for _ in range(5)] and i  # noqa: E731
    config, every = _all_threads()
    with profile(activities=[ProfilerActivity.CPU], experimental_config=config) as prof:
        assert row_split.run(work, [0, 1]) == [0, 1]                     # one part here, one on the pool's thread
    calls = sum(e.count for e in prof.key_averages() if e.key == "aten::mm")
    assert every and calls == 10                                         # the calling thread's alone would be 5
