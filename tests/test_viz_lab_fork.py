"""The lab's fork and kept points without a kernel: a fork continues bit for bit with the same knobs, a knob set in
one branch changes only that branch, forks too big to copy are refused, the panels overlay both branches with
labels, compare() tabulates both, rewind reaches any kept step, and the panel shows one step everywhere."""

import html
import re

import pytest
import torch

from rlnb import Trainer
from rlnb.lab import LabLoop
from rlnb.lab import fork as fork_mod
from rlnb.viz import Lab


def tiny(**kw):
    return Trainer.tiny("grpo", **{"prompts_per_step": 4, "num_generations": 8, "max_new_tokens": 24, **kw})


def no_timing(history):
    return [{k: v for k, v in h.items() if not k.startswith("timing/")} for h in history]


def test_a_fork_with_the_same_knobs_continues_bit_for_bit_like_the_original():
    t = tiny()
    loop = LabLoop(t, knobs=("beta", "lr"))
    loop.step()
    branch = loop.fork()
    for _ in range(3):
        loop.step()
    assert t.step_count == 4 and len(branch.history) == 4 and branch.since == 1
    assert no_timing(branch.history) == no_timing(t.history)
    assert len({h["reward"] for h in t.history}) > 1 or len({h["loss"] for h in t.history}) > 1  # it did train
    main = {k: v.clone() for k, v in t.model.state_dict().items()}
    fork_weights = loop.in_branch("fork", lambda tr: {k: v.clone() for k, v in tr.model.state_dict().items()})
    assert all(torch.equal(main[k], fork_weights[k]) for k in main)
    assert all(torch.equal(main[k], v) for k, v in t.model.state_dict().items())  # main put back after
    loop.close()


def test_a_knob_set_in_one_branch_changes_only_that_branchs_hp():
    t = tiny()
    loop = LabLoop(t, knobs=("beta", "lr", "eps_high"))
    loop.step()
    loop.fork()
    loop.set("lr", 3e-4, branch="fork")
    for _ in range(2):
        loop.step()
    main, fork = t.history, loop.fork_branch.history
    assert [h["hp/lr"] for h in main] == [1e-4] * 3 and [h["hp/lr"] for h in fork] == [1e-4, 3e-4, 3e-4]
    for k in ("hp/beta", "hp/eps_high"):
        assert [h[k] for h in main] == [h[k] for h in fork]
    assert no_timing(main[:1]) == no_timing(fork[:1])                # the shared step before the fork
    fork_weights = loop.in_branch("fork", lambda tr: {k: v.clone() for k, v in tr.model.state_dict().items()})
    assert not all(torch.equal(v, fork_weights[k]) for k, v in t.model.state_dict().items())  # lr moved the fork only
    assert loop.labels() == ("lr 0.0001", "lr 0.0003 from step 1")
    assert "fork: lr 0.0003 from step 1" in loop.status()
    loop.close()


def test_a_fork_too_big_to_copy_is_refused_naming_why_and_nothing_changes(monkeypatch):
    t = tiny()
    loop = LabLoop(t)
    need = fork_mod.cost(t)
    n_params = sum(p.numel() for p in t.model.parameters())
    assert need >= 3 * 4 * n_params  # fp32 weights plus Adam's two moments (which it holds from the first update)
    loop.step()
    assert abs(fork_mod.cost(t) - need) < 1024                      # (plus Adam's step counters)
    monkeypatch.setattr(fork_mod.points, "free_bytes", lambda device: need)  # a fork may take half of what is free
    with pytest.raises(MemoryError, match=r"fork: this model is too big to copy here.*MiB"):
        loop.fork()
    assert loop.fork_branch is None and loop.step().metrics["step"] == 2
    monkeypatch.setattr(fork_mod.points, "free_bytes", lambda device: 4 * need)
    assert loop.fork() is loop.fork_branch
    loop.close()


def test_bad_fork_knobs_and_a_second_fork_are_refused():
    loop = LabLoop(tiny())
    with pytest.raises(ValueError, match="eps_high"):
        loop.fork(eps_high=-1.0)
    assert loop.fork_branch is None
    loop.fork()
    with pytest.raises(RuntimeError, match="already open"):
        loop.fork()
    with pytest.raises(RuntimeError, match="close it first"):
        loop.rewind(0)
    with pytest.raises(ValueError, match="branch"):
        loop.set_many({"beta": 0.1}, branch="other")
    loop.close()


def test_rewind_reaches_any_kept_step_and_names_the_kept_ones():
    t = tiny(prompts_per_step=2, num_generations=4, max_new_tokens=10)
    loop = LabLoop(t, keep_every=2, keep_limit=4)
    for _ in range(9):
        loop.step()
    assert loop.kept.steps() == [0, 4, 6, 8]           # every 2 steps, at most 4: the first, then the newest
    assert re.fullmatch(r"kept steps 0, 4, 6, 8 \(4 points, \d+ MiB\)", loop.kept_text())
    with pytest.raises(ValueError, match=r"step: 5 is not a kept step; kept: \[0, 4, 6, 8\]"):
        loop.rewind(5)
    want = no_timing(t.history[:4])
    assert loop.rewind(4) == 4 and no_timing(t.history) == want
    assert loop.rewind(0) == 0 and t.history == [] and loop.kept.steps() == [0]
    loop.close()


def test_the_lab_overlays_both_branches_labelled_and_compares_them():
    t = tiny()
    lab = Lab(t, backend="static")
    lab.step()
    lab.fork(beta=0.05)
    assert lab.branch.value == "fork" and not lab.branch.disabled
    lab.step()
    lab.step()
    fig = lab.dashboard.fig
    metas = [tr.meta for tr in fig.data]
    assert "reward" in metas and "fork/reward" in metas and "fork/clip_ratio/low_mean" in metas
    titles = {tr.meta: tr.legendgrouptitle.text for tr in fig.data if tr.legendgrouptitle.text}
    assert titles["fork/reward"] == "beta 0.05 from step 1" and titles["reward"] == "beta 0"
    fork_beta = next(tr for tr in fig.data if tr.meta == "fork/hp/beta") if "fork/hp/beta" in metas else None
    assert fork_beta is None                                                    # panels only, no hp traces
    assert [h["hp/beta"] for h in lab.loop.fork_branch.history] == [0.0, 0.05, 0.05]
    assert lab.controls["beta"].value == pytest.approx(0.05)                    # the sliders drive the fork
    lab.branch.value = "main"
    assert lab.controls["beta"].value == 0.0
    table = lab.compare(n=16)
    assert list(table.index) == ["main: beta 0", "fork: beta 0.05 from step 1"]
    assert "held-out" in " ".join(table.columns) and table["last step"].tolist() == [3, 3]
    assert lab.close_fork() is not None and lab.branch.disabled and lab.step().metrics["step"] == 4
    assert len(lab.loop.fork_branch.history) == 3                               # closed: no longer stepped
    lab.close()


def test_status_readout_and_title_show_one_step_even_while_redraws_are_throttled():
    t = tiny(prompts_per_step=2, num_generations=4, max_new_tokens=10)
    lab = Lab(t, backend="static")
    lab.step()
    lab.set("beta", 0.05)
    lab.dashboard.clock = lambda: 0.0          # a frozen clock: every further step is throttled
    lab.dashboard._last = 0.0
    lab.loop.state = "stepping"                # as while playing: no flush on refresh
    lab.loop._one_step()
    lab.loop.state = "paused"
    shown = lambda text: {int(s) for s in re.findall(r"step (\d+)(?! ->)(?!\d)", text.split("last change")[0])}  # noqa: E731
    status, readout, title = html.unescape(lab.status.value), lab.dashboard.status.value, lab.dashboard.fig.layout.title.text
    assert t.step_count == 2 and shown(status) == shown(readout) == shown(title) == {1}, (status, readout, title)
    assert "beta 0 -> 0.05 at step 2" in status and "beta 0 -> 0.05 at step 2" in title
    lab._refresh()                             # paused: the panel catches up, all three together
    assert shown(lab.status.value) == shown(lab.dashboard.fig.layout.title.text) == {2}
    lab.close()


def test_a_scenario_fix_runs_in_a_fork_against_the_untreated_run():
    t = tiny(prompts_per_step=2, num_generations=4, max_new_tokens=10)
    lab = Lab(t, backend="static")
    lab.set_up("instability")
    lab.step()
    lab.try_fix("instability")
    lab.step()
    assert t.history[-1]["hp/lr"] == 1e-3 and lab.loop.fork_branch.history[-1]["hp/lr"] == 1e-4
    assert lab.loop.labels() == ("lr 0.001", "lr 0.0001 from step 1")
    with pytest.raises(ValueError, match="name"):
        lab.try_fix("no such")
    lab.close()


def test_the_fork_button_while_playing_forks_at_a_step_boundary_and_plays_on():
    t = tiny(prompts_per_step=2, num_generations=4, max_new_tokens=10)
    lab = Lab(t, backend="static")
    lab.play()
    lab.wait(1)
    lab.buttons["Fork"].click()
    try:
        assert lab.message.value == "" and lab.loop.fork_branch is not None and lab.loop.state == "playing"
        since = lab.loop.fork_branch.since
        lab.wait(since + 2)
    finally:
        lab.pause()
    b = lab.loop.fork_branch
    assert len(b.history) == t.step_count > since and no_timing(b.history) == no_timing(t.history)
    lab.close()
