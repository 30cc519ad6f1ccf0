"""Where the update's time goes: one GRPO update (forward, loss, backward, clipping, optimizer) under torch.profiler.

The row parts' forwards and backwards run on two threads (``rlnb.models.row_split``): a phase's CPU total is
the calling thread's wall time in it, and the operator table counts both threads' operators (torch.profiler records
the calling thread's only unless asked: ``_all_threads``; the table's first line says which).

``python scripts/bench_vs_trl.py --profile docs/bench_vs_trl_profile.txt`` writes it after the benchmark, on the
benchmark's own trainer (its settings, its weights by then); ``profile_update`` is the function. The phases are
the Updater's own, replayed one by one with a label each (``record_function``), so the table says how much of
backward + optimizer is arithmetic (``aten::mm``/``addmm``/``bmm`` and their backward) and how much is the
small elementwise kernels around it. Not a timing to compare across machines: the profiler adds its own cost
to every operator (tens of microseconds on a busy CPU), so read shares, not seconds.
"""

from __future__ import annotations

import contextlib
import io

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from rlnb.models import row_split

PHASES = ("loss", "forward", "backward", "clip_grad_norm", "optimizer")
MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::_scaled_dot_product_flash_attention_for_cpu",
              "aten::_scaled_dot_product_flash_attention_for_cpu_backward", "aten::linear_backward")


def update_phases(updater, batch) -> dict:
    """One optimizer step of ``updater`` on the whole ``batch`` (on-policy: one mini-batch), phase by phase as
    ``Updater._one_step`` runs them; returns the loss. The model's weights change as in a real step."""
    updater.model.train()
    opt = updater.optimizer
    policy = updater._policy_parts

    def labelled(*a, **k):
        with record_function("forward"):
            return policy(*a, **k)

    updater._policy_parts = labelled                                      # the forward inside the loss, labelled
    try:
        with record_function("loss"):
            res = updater.loss(batch)                                     # includes "forward"
    finally:
        del updater._policy_parts
    opt.zero_grad(set_to_none=True)
    params = [p for g in opt.param_groups for p in g["params"] if p.requires_grad]
    with record_function("backward"):
        if res.parts is None:
            res.total.backward()
        else:                                                             # as _one_step: each part on its thread
            row_split.backward(res.total, res.parts, params)
    with record_function("clip_grad_norm"):
        params = [p for p in params if p.grad is not None]
        torch.nn.utils.clip_grad_norm_(params, updater.max_grad_norm or float("inf"))
    with record_function("optimizer"):
        opt.step()
    opt.zero_grad(set_to_none=True)
    return {"loss": float(res.total.detach())}


def _all_threads():
    """(the profiler's config that records every thread's operators, whether it does): by default torch.profiler
    records the calling thread's only, and the row parts run on two (``profile_all_threads``; older torch has no such option)."""
    try:
        return torch._C._profiler._ExperimentalConfig(profile_all_threads=True), True
    except (TypeError, AttributeError):
        return None, False


def profile_update(trainer, *, repeats: int = 3, top: int = 25) -> str:
    """The profiler's table for ``repeats`` updates of ``trainer`` on fresh rollouts (rollouts not profiled):
    per phase, then the top operators by self CPU time, then the share of matmul operators."""
    batches = [trainer.advantager.step(trainer.rollout()) for _ in range(repeats + 1)]
    update_phases(trainer.updater, batches[0])                            # warm-up: AdamW allocates its state
    config, every_thread = _all_threads()
    with profile(activities=[ProfilerActivity.CPU], experimental_config=config) as prof:
        for b in batches[1:]:
            update_phases(trainer.updater, b)
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    lines = [f"torch.profiler, CPU, {repeats} GRPO updates (B={batches[0].B} rows) at the benchmark's settings; "
             f"threads={torch.get_num_threads()}; self CPU total {total / 1e3 / repeats:.1f} ms per update "
             f"(profiler overhead included); operators of {'every thread' if every_thread else 'this thread only'}",
             "", "per phase (CPU total, ms per update):"]
    for e in events:
        if e.key in PHASES:
            lines.append(f"  {e.key:15s} {e.cpu_time_total / 1e3 / repeats:8.1f}")
    mm = sum(e.self_cpu_time_total for e in events if e.key in MATMUL_OPS)
    small = sum(e.count for e in events if e.key.startswith("aten::") and e.key not in MATMUL_OPS)
    lines += ["", f"matmul operators: {mm / max(total, 1):.0%} of self CPU time; other aten calls per update: "
              f"{small // repeats}", "", "top operators by self CPU time:"]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        print(events.table(sort_by="self_cpu_time_total", row_limit=top, max_name_column_width=60))
    return "\n".join(lines) + "\n" + buf.getvalue()
