"""What each notebook must show in JupyterLab, and the slider the browser test moves in it.

Every notebook in ``notebooks/`` needs an entry in ``EXPECT`` (the test fails and lists what the page shows
when one is missing). An entry names the main widget (screenshotted), the least number of rendered sliders
and plotly figures, and either a ``Drive`` (one slider moved with the keyboard, with an oracle for what the
widget must then show) or the reason there is nothing to drive. ``Training`` adds the live-dashboard and
interrupt check of the start-here notebook.

Oracles compute what the widget must show *independently of the widget*: by hand from the data (the
fixture's clip explorer) or by asking the kernel for the library's numbers on the notebook's own data
(``probe(code)`` returns the stdout of ``code`` run in the notebook's kernel, outside any cell).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass

ARROWS = ("ArrowRight", "ArrowRight", "ArrowRight", "ArrowLeft")  # net +2 steps, both directions used


@dataclass(frozen=True)
class Drive:
    """Move the slider of knob ``slider`` of the widget of kind ``widget`` (rlnb.viz.hooks: ``clip-explorer``) with
    ``keys``. ``observe(state)`` reads what the widget shows (``state``: ``readout``, ``values`` (its exact numbers by
    key, else the parsed readout), ``title`` and ``traces`` of its figure, ``sliders``: knob -> displayed value); it
    must change, and equal
    ``expected(state, probe)`` (numbers within ``tol``)."""

    widget: str
    slider: str
    observe: Callable[[dict], object]
    expected: Callable[[dict, Callable[[str], str]], object]
    what: str
    keys: tuple[str, ...] = ARROWS
    tol: float = 6e-5  # explorers hand over exact values; the dashboard and lab readouts print 3-4 digits


@dataclass(frozen=True)
class Training:
    """Append ``code`` (a long training run), watch the dashboard (the rlnb widget of kind ``dashboard``)
    gain ``min_new_points`` points on trace ``trace`` while the cell runs, interrupt the kernel, expect the
    clean-stop message and no traceback, then append ``after`` and expect its output to match."""

    code: str
    after: str
    after_expect: str  # a format string of the step count the interrupt left, e.g. "after: {step}"
    dashboard: str = "dashboard"
    trace: str = "reward"
    min_new_points: int = 2


@dataclass(frozen=True)
class Expect:
    main: str | None            # widget to screenshot (its kind, rlnb.viz.hooks); None: first figure
    min_sliders: int = 0
    min_plots: int = 0
    drive: Drive | None = None
    no_drive: str = ""          # why there is no slider to drive (required when drive is None)
    training: Training | None = None
    lab: bool = False           # the lab check: Play, move beta while it trains, run a cell, Pause
    timeout_s: float = 240      # run-all in smoke mode


def close(a, b, tol: float) -> bool:
    """Equal, with numbers (also inside tuples and lists) within ``tol``."""
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(close(x, y, tol) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, abs_tol=tol)
    return a == b


def trace(state: dict, name: str) -> dict:
    """The trace whose key (plotly ``meta``: a metric's history key, a stable hook) or name is ``name``."""
    for t in state["traces"]:
        if t.get("meta") == name or t["name"] == name:
            return t
    raise KeyError(f"no trace {name!r} in the widget's figure; traces: {[t['name'] for t in state['traces']]}")


def slider(state: dict, name: str) -> float:
    """A slider's value as the page displays it."""
    return float(state["sliders"][name])


def readout_probe(widget: str, slider_name: str, key: str, code: str, what: str) -> Drive:
    """The common case in one line: move ``slider_name``; readout ``key`` must equal the number that
    ``code`` prints in the notebook's kernel. ``code`` is a format string of ``value`` (the slider's value
    as displayed) that calls the library on the notebook's own objects, e.g. for a KL explorer
    ``"print(rlnb.viz.figures.compute.gaussian_kl({value}, 1.0, 0.0, 1.0))"``."""
    return Drive(widget=widget, slider=slider_name, observe=lambda s: s["values"][key],
                 expected=lambda s, probe: float(probe(code.format(value=slider(s, slider_name)))), what=what)


# --- the fixture: a clip explorer on the hand-made demo batch ---------------------------------------------

def demo_high_clip_share(eps_high: float) -> float:
    """PPO-clip's high clip share on ``rlnb.viz.explorers.demo``'s batch, by its definition: tokens with A > 0 and
    rho > 1 + eps_high, over the tokens in the loss."""
    from rlnb.viz.explorers.demo import demo_record

    rec = demo_record()
    m = rec.batch.mask.bool()                                            # (B, T)
    adv = rec.batch.adv[:, None].expand_as(m)                            # (B, T)
    high = (rec.stats.ratio > 1 + eps_high) & (adv > 0) & m
    return int(high.sum()) / int(m.sum())


CLIP_EPS_HIGH = Drive(
    widget="clip-explorer", slider="eps_high",
    observe=lambda s: (s["values"]["clip_ratio/high_mean"], max(trace(s, "objective A>0")["y"])),
    # for A > 0 the clipped objective min(rho A, clip(rho) A) plateaus at (1 + eps_high) A
    expected=lambda s, probe: (demo_high_clip_share(slider(s, "eps_high")),
                               (1 + slider(s, "eps_high")) * slider(s, "A")),
    what="high clip share of the demo batch and the A>0 objective's plateau (1 + eps_high) A")


# --- the start-here notebook: token X-ray and dashboard ---------------------------------------------------

XRAY_PROBE = """import json as _j
_r = trainer.records[-1]; _G = _r.batch.group_size
print(_j.dumps([f"{{_r.batch.prompts[{g} * _G]}} -> {{_r.batch.answers[{g} * _G]}}", float(_r.batch.adv[{g} * _G])]))"""

XRAY_GROUP = Drive(
    widget="token-x-ray", slider="group",
    observe=lambda s: (s["title"].split(": ", 1)[-1], s["values"]["A_0"]),
    expected=lambda s, probe: tuple(json.loads(probe(XRAY_PROBE.format(g=int(slider(s, "group")))))),
    what="the group's prompt -> answer in the figure title and its first advantage A_0 (trainer.records[-1])")

# --- 01: the entropy view -----------------------------------------------------------------------------------

def entropy_target(history: str) -> Drive:
    """Move the entropy view's target: the target line's height and the steps of ``history`` (kernel code) below it."""
    return Drive(
        widget="entropy-view", slider="target",
        observe=lambda s: (sorted(set(trace(s, "target")["y"])), s["values"]["steps below target"]),
        expected=lambda s, probe: ([slider(s, "target")], float(probe(
            f"print(sum(h['entropy'] < {slider(s, 'target')!r} for h in {history}))"))),
        what=f"the target line's height and the number of steps in {history} below it")


ENTROPY_TARGET = entropy_target("trainer.history")
CAPSTONE_TARGET = entropy_target('runs["mine", SEEDS[0]].history')   # 16: the learner's own recipe, first seed

# --- 02 and 03: the advantage explorer, noise drawn per completion -----------------------------------------

def advantage_noise_probe(rewards_expr: str) -> str:
    """Kernel code printing GRPO's A_0 for the group ``rewards_expr`` plus the explorer's seeded noise
    (seed 0) with sigma_sample = {value}: the library's numbers, computed outside the widget."""
    return ("import torch as _t; from rlnb.viz.figures import compute as _c; _r = _t.as_tensor(" + rewards_expr + ", "
            "dtype=_t.float64); _n = _c.noisy_rewards(_r, sigma_shared={shared}, sigma_sample={{value}}, seed=0); "
            "print(float(rlnb.algos.ADVANTAGES['grpo'](_n, len(_r))[0]))")


REWARDS_NOISE = readout_probe("advantage-explorer", "sigma_sample", "A_0",
                              advantage_noise_probe("[1, 0, 0, 0, 0, 0, 0, 0]").format(shared=0.3),
                              "GRPO's A_0 for rewards (1, 0, ..., 0) + shared 0.3 and per-sample noise")
ADVANTAGES_NOISE = readout_probe(
    "advantage-explorer", "sigma_sample", "A_0",
    advantage_noise_probe("batch.rewards[live[0] * batch.group_size:(live[0] + 1) * batch.group_size]").format(shared=0.0),
    "GRPO's A_0 for the notebook's real group plus per-sample noise")

# --- 04: the clip explorer on a real multi-mini-batch batch; 10: the token X-ray of a random Qwen2 ----------

CLIP_REAL_PROBE = ("_m = mb.mask.bool(); "
                   "print(int(((mb.adv[:, None] > 0) & _m & (st.ratio > 1 + {value})).sum()) / int(_m.sum()))")

CLIP_REAL_EPS_HIGH = Drive(
    widget="clip-explorer", slider="eps_high",
    observe=lambda s: (s["values"]["clip_ratio/high_mean"], max(trace(s, "objective A>0")["y"])),
    expected=lambda s, probe: (float(probe(CLIP_REAL_PROBE.format(value=slider(s, "eps_high")))),
                               (1 + slider(s, "eps_high")) * slider(s, "A")),
    what="the real batch's high clip share (A > 0 and rho > 1 + eps_high, from the Updater's ratios) and the A>0 "
         "objective's plateau (1 + eps_high) A")

QWEN_XRAY_PROBE = """import json as _j
_r = qwen.records[-1]; _G = _r.batch.group_size
print(_j.dumps([f"Step {{_r.metrics['step']}}, group {g}", float(_r.batch.adv[{g} * _G])]))"""

QWEN_XRAY_GROUP = Drive(
    widget="token-x-ray", slider="group",
    observe=lambda s: (s["title"].split(":", 1)[0], s["values"]["A_0"]),  # GSM8K prompts hold newlines: no prompt
    expected=lambda s, probe: tuple(json.loads(probe(QWEN_XRAY_PROBE.format(g=int(slider(s, "group")))))),
    what="'Step n, group g' in the figure title and the group's first advantage A_0 (qwen.records[-1])")

# --- 04: GAE on the real batch; 09: Monte-Carlo credit of one completion ------------------------------------

GAE_PROBE = ("from rlnb.algos import gae as _g; from rlnb.notebook.critic import masked_std as _s, outcome_token_rewards as _o; "
             "_i = rows; _m = last.mask[_i].float(); "
             "_a, _ = _g(_o(last.correct.float()[_i], _m), V_all[_i].float() * _m, _m, gamma={gamma}, lam={value}, "
             "whiten_advantages=False); print(_s(_a, _m))")

GAE_LAMBDA = Drive(
    widget="gae-explorer", slider="lam", keys=("ArrowLeft", "ArrowLeft", "ArrowLeft", "ArrowRight"),  # starts at 1
    observe=lambda s: s["values"]["spread"],
    expected=lambda s, probe: float(probe(GAE_PROBE.format(gamma=slider(s, "gamma"), value=slider(s, "lam")))),
    what="the spread of the shown rows' GAE advantages at the displayed lambda, from rlnb.algos.gae on the notebook's "
         "batch and critic values")

CREDIT_PROBE = """import json as _j, torch as _t
from rlnb.stages.credit import prefix_values as _pv
_r, _K = {row}, view.controls["K"].value
_g = _t.Generator().manual_seed(view.seed * 1_000_003 + _r * 101 + _K)
_v = _pv(model, tok, batch, task, K=_K, rows=[_r], generator=_g, temperature=1.0, max_new_tokens=M)
print(_j.dumps([batch.prompts[_r] + batch.completions[_r], float(batch.rewards[_r]), float(_v[0, 0])]))"""


def credit_expected(s: dict, probe) -> tuple:
    text, reward, v0 = json.loads(probe(CREDIT_PROBE.format(row=int(slider(s, "row")))))
    return text, reward, v0, reward - v0  # per-token credit telescopes: sum_t A_t = reward - V(prompt)


CREDIT_ROW = Drive(
    widget="credit-view", slider="row",  # the title starts with the picked prompt + completion
    observe=lambda s: (s["title"].split("  (")[0], s["values"]["reward"], s["values"]["V(prompt)"],
                       s["values"]["sum of A_t"]),
    expected=credit_expected,
    what="the picked completion (title), its reward, its Monte-Carlo V(prompt) recomputed by rlnb.stages.credit.prefix_values "
         "with the view's seed, and the sum of its per-token credit (reward - V(prompt))")

# --- 05-08 ----------------------------------------------------------------------------------------------------

def gaussian_kl_by_hand(s: dict) -> float:
    """KL(N(pi_mean, pi_std^2) || N(ref_mean, ref_std^2)) from the sliders as displayed, by its closed form."""
    m1, s1, m2, s2 = (slider(s, k) for k in ("pi_mean", "pi_std", "ref_mean", "ref_std"))
    return math.log(s2 / s1) + (s1 ** 2 + (m1 - m2) ** 2) / (2 * s2 ** 2) - 0.5


KL_PI_MEAN = Drive(
    widget="kl-explorer", slider="pi_mean", observe=lambda s: s["values"]["KL"],
    expected=lambda s, probe: gaussian_kl_by_hand(s),
    what="the exact KL(pi || pi_ref) of the two Gaussians, by its closed form")

# seq-mean-token-mean on a hand-made group of G rows: a token's weight is 1 / (G |o_i|), so a wrong token weighs
# len_right / len_wrong of a right one
AGG_LEN_WRONG = Drive(
    widget="aggregation-explorer", slider="len_wrong",
    observe=lambda s: (s["values"]["wrong/right"], s["values"]["weight wrong"]),
    expected=lambda s, probe: (slider(s, "len_right") / slider(s, "len_wrong"),
                               1 / (slider(s, "G") * slider(s, "len_wrong"))),
    what="seq-mean-token-mean's per-token weight ratio len_right / len_wrong and a wrong token's weight 1 / (G |o|)")

MAXRL_P = readout_probe(
    "advantage-explorer", "p", "mean A right",
    "from rlnb.viz.figures import compute as _c; _a, _r = _c.advantage_samples(rlnb.algos.ADVANTAGES['maxrl'], {{}}, G=8, "
    "p={value}, sigma_shared=0.0, sigma_sample=0.0); print(float(_a[_r].mean()))",
    "MaxRL's mean advantage of a right completion over the simulated groups, from the library")

START_HERE_TRAINING = Training(code="dash.run(trainer, 400)",
                               after='print("after the interrupt:", trainer.step_count)',
                               after_expect="after the interrupt: {step}")

EXPECT: dict[str, Expect] = {
    # fixtures (tests/browser/fixtures), always run
    "widgets.ipynb": Expect(main="clip-explorer", min_sliders=5, min_plots=2, drive=CLIP_EPS_HIGH,
                            training=Training(code="dash.run(trainer, 400, progress=False)",
                                              after="print('after:', trainer.step_count)",
                                              after_expect="after: {step}"), timeout_s=120),
    # the curriculum (notebooks/)
    "00_start_here.ipynb": Expect(main="dashboard", min_sliders=2, min_plots=2, drive=XRAY_GROUP,
                                  training=START_HERE_TRAINING),
    "01_sampling_and_groups.ipynb": Expect(main="entropy-view", min_sliders=1, min_plots=3, drive=ENTROPY_TARGET),
    "02_rewards.ipynb": Expect(main="advantage-explorer", min_sliders=5, min_plots=2, drive=REWARDS_NOISE),
    "03_advantages.ipynb": Expect(main="advantage-explorer", min_sliders=5, min_plots=3, drive=ADVANTAGES_NOISE),
    "04_ppo_critic_and_gae.ipynb": Expect(main="gae-explorer", min_sliders=2, min_plots=3, drive=GAE_LAMBDA),
    "05_ratio_and_clipping.ipynb": Expect(main="clip-explorer", min_sliders=5, min_plots=3, drive=CLIP_REAL_EPS_HIGH),
    "06_kl_and_entropy.ipynb": Expect(main="kl-explorer", min_sliders=7, min_plots=4, drive=KL_PI_MEAN),
    "07_reward_hacking_and_kl.ipynb": Expect(main="kl-explorer", min_sliders=6, min_plots=3, drive=KL_PI_MEAN),
    "08_aggregation_and_length_bias.ipynb": Expect(main="aggregation-explorer", min_sliders=4,
                                                   min_plots=2, drive=AGG_LEN_WRONG),
    "09_credit_assignment.ipynb": Expect(main="credit-view", min_sliders=1, min_plots=1, drive=CREDIT_ROW),
    "10_dapo.ipynb": Expect(main="clip-explorer", min_sliders=4, min_plots=2, drive=CLIP_EPS_HIGH),
    "11_instability.ipynb": Expect(main="clip-explorer", min_sliders=4, min_plots=2, drive=CLIP_REAL_EPS_HIGH),
    "12_zoo_race.ipynb": Expect(main="advantage-explorer", min_sliders=4, min_plots=3, drive=MAXRL_P),
    "13_the_lab.ipynb": Expect(main="lab", min_sliders=7, min_plots=2, lab=True,
                               no_drive="the lab's check drives it instead: Play, beta moved while it trains, "
                               "another cell run meanwhile, Pause"),
    "14_kernels.ipynb": Expect(main=None, min_plots=1, no_drive="no widget: the kernel lesson's numbers are code "
                               "cells (parity, memory); its one figure is static"),
    "15_your_own_model.ipynb": Expect(main="token-x-ray", min_sliders=2, min_plots=2, drive=QWEN_XRAY_GROUP),
    "16_capstone.ipynb": Expect(main="entropy-view", min_sliders=1, min_plots=2, drive=CAPSTONE_TARGET),
}
