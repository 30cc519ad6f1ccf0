"""One decision rule for every training-level claim, written before measuring (issue 38).

A ``Plan`` per claim fixes, before its measured runs: the comparison (``file``, ``arm`` - ``control`` on ``spec``,
the claimed ``sign``), the smallest effect it must detect (``mde``, in the metric's units, with its reason), the
pilot whose spread sized it, the seeds that give 80 % power for a two-sided paired t-test at 5 % at that spread
(``seeds_for_power``, at least 5), and the activity checks: the mechanism's measured precondition. Plans live in
``docs/results/plans.json`` with the date and git commit they were written at.

The mean of the per-seed paired differences with its two-sided 95 % Student-t interval [lo, hi] then gives one
of four verdicts (``decide``), each printed with its numbers; ``e`` is an effect in the claimed direction:

- **reproduced**: the interval lies on the claimed side of 0;
- **effect above X excluded**: the interval's claimed-side end X is below the MDE (an informative null; an
  interval wholly on the opposite side is this verdict too, "the opposite direction");
- **inconclusive: effects up to X not excluded**: the interval covers 0 and reaches the MDE;
- **untestable here**: an activity check failed (the mechanism had nothing to act on), with the measured reason.

"k of n seeds on the claimed side" counts the claimed side, not the majority.
"""

from __future__ import annotations

import json
import math
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rlnb.studies.summary import Stat, t_quantile_975

VERDICTS = ("reproduced", "excluded", "inconclusive", "untestable")
RULE_MARKDOWN = (
    "**The decision rule** (`rlnb.studies.decide`, one for every training-level row). Before measuring, each "
    "claim's plan (`docs/results/plans.json`, with the date and git commit it was written at) fixes the comparison "
    "(arm - control per seed on one number, the claimed direction), the smallest effect it must detect (MDE, with "
    "its reason), the pilot whose spread sized it (pilot seeds are never measured seeds) and the seeds that give "
    "80 % power for a two-sided paired t-test at 5 % at that spread (at least 5), and the activity checks: the "
    "mechanism's measured precondition. From the mean of the paired differences and its two-sided 95 % "
    "Student-t interval: **reproduced** when the interval lies on the claimed side of 0; **effect above X "
    "excluded** when its claimed-side end X is below the MDE (an informative null; \"the opposite direction\" "
    "when the whole interval lies on the other side); **inconclusive: effects up to X not excluded** when it "
    "reaches the MDE; **untestable here** when an activity check failed, with the measured reason. \"k of n seeds "
    "on the claimed side\" counts the claimed side, not the majority. Rows measured before their plan say \"plan "
    "written after the data\"; rows with fewer than 5 seeds, or fewer than the plan's power needs, say so; a third "
    "attempt decides its row once every planned run is done (until then: \"interim\", with its runs done).")
MIN_SEEDS = 5
_T80 = (1.376, 1.061, 0.978, 0.941, 0.920, 0.906, 0.896, 0.889, 0.883, 0.879, 0.876, 0.873, 0.870, 0.868, 0.866,
        0.865, 0.863, 0.862, 0.861, 0.860)


def t_quantile_80(df: int) -> float:
    """The 0.80 quantile of Student's t with ``df`` degrees of freedom (table to 20, then 0.8416 + 0.38 / df).

    >>> t_quantile_80(9), round(t_quantile_80(1000), 3)
    (0.883, 0.842)
    """
    if df < 1:
        raise ValueError(f"df: expected >= 1, got {df!r}")
    return _T80[df - 1] if df <= len(_T80) else 0.8416 + 0.38 / df


def seeds_for_power(sd: float, mde: float, *, minimum: int = MIN_SEEDS) -> int:
    """Seeds a two-sided paired t-test at 5 % needs for 80 % power to detect ``mde`` when the paired differences
    spread by ``sd``: the smallest n with n >= ((t_0.975,n-1 + t_0.80,n-1) sd / mde)^2, at least ``minimum``.

    The normal approximation ((1.96 + 0.84) sd / mde)^2 says 7.84 -> 8 for sd = mde; the t distribution asks
    more: n = 9 gives (2.306 + 0.889)^2 = 10.2 > 9, n = 10 gives (2.262 + 0.883)^2 = 9.89 <= 10:

    >>> seeds_for_power(0.1, 0.1), seeds_for_power(0.02, 0.1), seeds_for_power(0.05, 0.1)
    (10, 5, 5)
    >>> seeds_for_power(0.1, 0.05)      # n = 34: 4 (2.033 + 0.853)^2 = 33.3; n = 33: 33.4 > 33
    34
    """
    if not (sd >= 0 and mde > 0):
        raise ValueError(f"sd, mde: expected sd >= 0 and mde > 0, got sd={sd!r}, mde={mde!r}")
    n = max(2, minimum)
    while ((t_quantile_975(n - 1) + t_quantile_80(n - 1)) * sd / mde) ** 2 > n:
        n += 1
    return n


@dataclass(frozen=True)
class Check:
    """An activity check: ``reducer:metric`` of the comparison's ``role`` ("arm" or "control"; mean over seeds, or
    with ``interval`` its 95 % interval's far end) must be ``op`` ("<" or ">=") ``threshold``; ``what`` names the
    measured reason, ``percent`` prints it as a share."""

    spec: str
    role: str
    op: str
    threshold: float
    what: str
    percent: bool = False
    interval: bool = False

    def __post_init__(self):
        if self.role not in ("arm", "control") or self.op not in ("<", ">="):
            raise ValueError(f"role, op: expected 'arm'/'control' and '<'/'>=', got {self.role!r}, {self.op!r}")

    def measure(self, result, arm: str, control: str | None) -> tuple[bool, str]:
        """(passed, the measured reason) on ``result``, the role resolved to ``arm`` or ``control``."""
        name = arm if self.role == "arm" else control
        s = result.value(name, self.spec)
        lo, hi = s.ci95()
        x = (hi if self.op == "<" else lo) if self.interval else s.mean  # interval: the whole of it past the bound
        ok = x == x and (x < self.threshold if self.op == "<" else x >= self.threshold)
        fmt = (lambda v: f"{100 * v:.2f} %") if self.percent else (lambda v: f"{v:+.3f}")  # noqa: E731
        ci = f" (mean {s.mean:+.3f}, 95 % CI {lo:+.3f}, {hi:+.3f})" if self.interval else ""
        end = "interval's upper end " if self.interval and self.op == "<" else "interval's lower end " \
            if self.interval else ""
        return ok, f"{self.what}: {end}{fmt(x)}{ci}, needs {self.op} {fmt(self.threshold)} ({name}, {s.n} seeds)"


@dataclass(frozen=True)
class Plan:
    """One claim's plan (see the module docstring); ``seeds`` are the measured seeds, ``pilot_sd`` the spread of the
    paired difference in ``pilot``."""

    claim: str
    file: str
    arm: str
    control: str | None
    spec: str
    sign: int
    mde: float
    mde_reason: str
    pilot: str
    pilot_sd: float
    seeds: tuple = ()
    checks: tuple = ()
    digits: int = 3
    kind: str = "paired"  # or "asymptote": ScaleRL's fitted A per seed

    def __post_init__(self):
        if self.sign not in (1, -1):
            raise ValueError(f"sign: expected 1 or -1, got {self.sign!r}")
        if not self.mde > 0:
            raise ValueError(f"mde: expected > 0 (in the units of {self.spec}), got {self.mde!r}")
        if len(self.seeds) < MIN_SEEDS:
            raise ValueError(f"seeds: {self.claim!r} plans {len(self.seeds)} seeds; at least {MIN_SEEDS}")

    @property
    def power_seeds(self) -> int | None:
        """Seeds for 80 % power at the pilot's spread (None when the pilot gave none: a plan on data measured
        before it keeps the data's seeds and says how many power needs)."""
        return seeds_for_power(self.pilot_sd, self.mde) if self.pilot_sd == self.pilot_sd else None


@dataclass(frozen=True)
class Decision:
    verdict: str                # one of VERDICTS, or "not measured"
    line: str                   # the verdict in words with its numbers
    stat: Stat = field(default_factory=lambda: Stat(()))
    ci: tuple = (math.nan, math.nan)
    head: str = ""              # the verdict's words ("effect above +0.012 excluded")
    nums: str = ""              # its numbers (mean [95 % CI], k of n seeds on the claimed side)


def decide(diffs: Stat, sign: int, mde: float, *, digits: int = 3, failed: str = "") -> Decision:
    """The verdict of paired differences ``diffs`` (arm - control per seed) for a claim of direction ``sign`` and
    smallest effect of interest ``mde``; ``failed``: the measured reason an activity check failed.

    >>> decide(Stat((0.1, 0.2, 0.15)), 1, 0.05).line   # mean 0.15, sd 0.05, t 4.303: 0.15 -/+ 0.124
    'reproduced: +0.150 [95 % CI +0.026, +0.274], 3 of 3 seeds on the claimed side'
    >>> decide(Stat((0.01, -0.01, 0.0)), 1, 0.05).line  # 0 -/+ 4.303 x 0.01 / sqrt 3 = 0.0248 < 0.05
    'effect above +0.025 excluded: +0.000 [95 % CI -0.025, +0.025], 1 of 3 seeds on the claimed side'
    >>> decide(Stat((0.1, 0.2, 0.15)), -1, 0.05).line  # claimed < 0: the whole interval on the other side
    'effect below +0.026 excluded (the opposite direction): +0.150 [95 % CI +0.026, +0.274], 0 of 3 seeds on the claimed side'
    >>> decide(Stat((0.1, -0.1, 0.0)), 1, 0.05).line   # 0 -/+ 4.303 x 0.1 / sqrt 3 = 0.248 > 0.05
    'inconclusive: effects up to +0.248 not excluded: +0.000 [95 % CI -0.248, +0.248], 1 of 3 seeds on the claimed side'
    >>> decide(Stat((0.1, 0.2, 0.15)), 1, 0.05, failed="0.04 % of tokens clipped high").verdict
    'untestable'
    """
    lo, hi = diffs.ci95()
    f = f"+.{digits}f"
    k = sum(sign * v > 0 for v in diffs.values)
    nums = (f"{diffs.mean:{f}} [95 % CI {lo:{f}}, {hi:{f}}], {k} of {diffs.n} seeds on the claimed side"
            if lo == lo else f"{diffs.n} seeds with a value")
    if failed:
        return Decision("untestable", f"untestable here: {failed}; measured {nums}", diffs, (lo, hi),
                        "untestable here", f"{failed}; measured {nums}")
    if lo != lo:
        return Decision("not measured", f"not measured ({diffs.n} seeds)", diffs, head="not measured",
                        nums=f"{diffs.n} seeds")
    near, far = (lo, hi) if sign > 0 else (-hi, -lo)  # the interval in claimed units
    x = sign * far  # the claimed-side end, in the metric's units
    above, up = ("above", "up") if sign > 0 else ("below", "down")
    if near > 0:
        verdict, head = "reproduced", "reproduced"
    elif far < mde:
        verdict, head = "excluded", f"effect {above} {x:{f}} excluded" + (" (the opposite direction)" if far < 0
                                                                         else "")
    else:
        verdict, head = "inconclusive", f"inconclusive: effects {up} to {x:{f}} not excluded"
    return Decision(verdict, f"{head}: {nums}", diffs, (lo, hi), head, nums)


def plans_path(root=None) -> Path:
    from rlnb.studies.results import results_dir

    return (Path(root) if root else results_dir()) / "plans.json"


def git_commit(cwd=None) -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=cwd,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_plans(plans, path: Path, *, commit: str | None = None) -> Path:
    """Write ``plans`` (``{key: Plan}``) with the UTC time and git commit; refuses to overwrite a plan already
    written (a plan changed after the data is no plan), but adds new ones."""
    old = json.loads(path.read_text()) if path.is_file() else {"plans": {}}
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for key, plan in plans.items():
        entry = {**asdict(plan), "seeds": list(plan.seeds), "checks": [asdict(c) for c in plan.checks]}
        if key in old["plans"]:
            kept = {k: v for k, v in old["plans"][key].items() if k not in ("written", "commit")}
            if json.loads(json.dumps(kept)) != json.loads(json.dumps(entry)):
                raise ValueError(f"plans: {key!r} is already written ({old['plans'][key]['written']}); "
                                 "a plan is not changed after it is written: add a new key")
            continue
        old["plans"][key] = {**entry, "written": now, "commit": commit or git_commit(path.parent)}
    path.write_text(json.dumps(old, indent=1, sort_keys=True) + "\n")
    return path


def load_plans(root=None) -> dict:
    """``{key: (Plan, written, commit)}`` from plans.json ({} when there is none)."""
    path = plans_path(root)
    if not path.is_file():
        return {}
    out = {}
    for key, e in json.loads(path.read_text())["plans"].items():
        e = dict(e)
        written, commit = e.pop("written"), e.pop("commit")
        checks = tuple(Check(**c) for c in e.pop("checks"))
        out[key] = (Plan(**{**e, "seeds": tuple(e["seeds"]), "checks": checks}), written, commit)
    return out


def plan_before_data(result, written: str) -> bool:
    """True when every run of ``result`` ended after the plan was written (runs without a time predate plans)."""
    ends = [r.info.get("ended") for r in result.runs]
    return bool(ends) and all(e is not None and e > written for e in ends)
