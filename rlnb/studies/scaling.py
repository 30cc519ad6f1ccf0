"""ScaleRL's sigmoidal compute-performance curve, fitted to (compute, reward or pass@1) points.

The Art of Scaling RL Compute (Khatri et al., arXiv 2510.13786) models the expected reward (or pass
rate) after spending compute C as

    R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)

- ``A``: the asymptote, the performance the recipe tends to with unlimited compute;
- ``B`` > 0: the efficiency, how steeply the curve rises (in log C) around its midpoint;
- ``C_mid`` > 0: the compute at which half of the gain A - R0 is reached;
- ``R0``: the starting performance (C = 0).

The paper compares recipes by A (where they end) and B (how fast they get there), fitted on the
curve past an initial transient. Here C is whatever the caller passes (samples generated, seconds).

The fit (written for this toolkit, plain torch, fp64): parameters are unconstrained and mapped to the
valid region, A = R0 + (upper - R0) sigmoid(a), B = softplus(b), C_mid = exp(c); the loss is the mean
squared error in R over the points with C > 0; L-BFGS from a small grid of starts (C_mid at quantiles
of the observed compute, B in {0.5, 1, 2}), keeping the best. R0 is fixed: the mean R of the points
with C = 0 when there are any (an evaluation at step 0), else the ``r0`` argument, else fitted too
(in [0, upper]). Few or flat points make B and C_mid poorly determined; A is the robust number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class ScalingFit:
    """A fitted curve R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B); call it on compute values.

    >>> fit = ScalingFit(A=0.8, B=1.0, C_mid=100.0, R0=0.2, mse=0.0, n=0)
    >>> [round(v, 6) for v in fit([0.0, 100.0, 300.0])]
    [0.2, 0.5, 0.65]
    """

    A: float
    B: float
    C_mid: float
    R0: float
    mse: float     # mean squared error of the fit on the points with C > 0
    n: int         # number of points fitted
    upper: float = 1.0  # the bound A was fitted under
    C_max: float = math.inf  # the largest compute among the fitted points

    @property
    def A_at_bound(self) -> bool:
        """True when A sits at its bound: the points show no bend, so the asymptote is not determined."""
        return self.A > self.upper - 1e-3 * max(abs(self.upper - self.R0), 1e-9)

    @property
    def extrapolated(self) -> bool:
        """True when the asymptote is a guess: A at its bound, or the midpoint C_mid beyond the data
        (less than half of the gain A - R0 was observed)."""
        return self.A_at_bound or self.C_mid > self.C_max

    def __call__(self, compute) -> list[float]:
        c = torch.as_tensor(compute, dtype=torch.float64).reshape(-1)
        return sigmoid_curve(c, A=self.A, B=self.B, C_mid=self.C_mid, R0=self.R0).tolist()

    def compute_for(self, reward: float) -> float:
        """The compute at which the curve reaches ``reward`` (inf if it never does)."""
        if not (min(self.R0, self.A) < reward < max(self.R0, self.A)):
            return math.inf
        frac = (self.A - self.R0) / (reward - self.R0) - 1.0       # = (C_mid / C)^B
        return self.C_mid / frac ** (1.0 / self.B)


def sigmoid_curve(C: torch.Tensor, *, A, B, C_mid, R0) -> torch.Tensor:
    """R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B), with R(0) = R0; tensors or floats broadcast.

    >>> [round(v, 6) for v in sigmoid_curve(torch.tensor([50.0, 100.0]), A=1.0, B=1.0, C_mid=100.0, R0=0.0).tolist()]
    [0.333333, 0.5]
    """
    C = torch.as_tensor(C, dtype=torch.float64)
    B, C_mid = torch.as_tensor(B, dtype=torch.float64), torch.as_tensor(C_mid, dtype=torch.float64)
    safe = C.clamp(min=1e-300)
    # 1 / (1 + (C_mid/C)^B) = sigmoid(B (log C - log C_mid)): stable for tiny and huge C
    frac = torch.sigmoid(B * (safe.log() - C_mid.log()))
    frac = torch.where(C > 0, frac, torch.zeros_like(frac))
    return R0 + (A - R0) * frac


def _check(compute, reward) -> tuple[torch.Tensor, torch.Tensor]:
    try:
        c = torch.as_tensor(compute, dtype=torch.float64).reshape(-1)
    except (TypeError, ValueError) as e:
        raise TypeError(f"compute: expected a 1-D sequence of numbers, got {type(compute).__name__}") from e
    try:
        r = torch.as_tensor(reward, dtype=torch.float64).reshape(-1)
    except (TypeError, ValueError) as e:
        raise TypeError(f"reward: expected a 1-D sequence of numbers, got {type(reward).__name__}") from e
    if c.numel() != r.numel():
        raise ValueError(f"compute, reward: expected equal lengths, got {c.numel()} and {r.numel()}")
    if not torch.isfinite(c).all() or (c < 0).any():
        raise ValueError("compute: expected finite values >= 0")
    if not torch.isfinite(r).all():
        raise ValueError("reward: expected finite values")
    if int((c > 0).sum()) < 3:
        raise ValueError(f"compute: expected at least 3 points with compute > 0, got {int((c > 0).sum())}")
    return c, r


def fit_sigmoid(compute, reward, *, r0: float | None = None, upper: float = 1.0, max_iter: int = 200) -> ScalingFit:
    """Fit ScaleRL's curve to points (compute_i, reward_i); see the module docstring for the method.

    ``upper`` bounds the asymptote A (1.0 for a pass rate or a 0/1 reward).
    """
    c, r = _check(compute, reward)
    if not (isinstance(upper, (int, float)) and math.isfinite(upper)):
        raise ValueError(f"upper: expected a finite number, got {upper!r}")
    zero = c == 0
    if zero.any():
        r0 = float(r[zero].mean())
    c, r = c[~zero], r[~zero]
    if r0 is not None and not r0 < upper:
        raise ValueError(f"r0: expected a starting value below upper={upper}, got {r0}")
    logc = c.log()
    best = None
    for q in (0.1, 0.3, 0.5, 0.7, 0.9):
        for b0 in (0.5, 1.0, 2.0):
            fit = _fit_from(logc, c, r, r0=r0, upper=upper, c0=float(torch.quantile(logc, q)), b0=b0,
                            max_iter=max_iter)
            if best is None or fit.mse < best.mse:
                best = fit
    return best


def _fit_from(logc, c, r, *, r0, upper, c0, b0, max_iter) -> ScalingFit:
    r_lo = r0 if r0 is not None else float(r.min())
    a_frac = min(max((float(r.max()) - r_lo) / max(upper - r_lo, 1e-9) + 0.02, 0.05), 0.95)
    p = {
        "a": torch.tensor(math.log(a_frac / (1 - a_frac)), dtype=torch.float64),
        "b": torch.tensor(math.log(math.expm1(b0)), dtype=torch.float64),   # softplus^-1(b0)
        "c": torch.tensor(c0, dtype=torch.float64),
        "r0": torch.tensor(math.log(_clip01(r_lo / upper) / (1 - _clip01(r_lo / upper))), dtype=torch.float64),
    }
    free = [p["a"], p["b"], p["c"]] + ([p["r0"]] if r0 is None else [])
    for t in free:
        t.requires_grad_(True)

    def params():
        R0 = torch.as_tensor(r0, dtype=torch.float64) if r0 is not None else upper * torch.sigmoid(p["r0"])
        return R0 + (upper - R0) * torch.sigmoid(p["a"]), F.softplus(p["b"]), p["c"].exp(), R0

    def loss():
        A, B, C_mid, R0 = params()
        return ((sigmoid_curve(c, A=A, B=B, C_mid=C_mid, R0=R0) - r) ** 2).mean()

    opt = torch.optim.LBFGS(free, max_iter=max_iter, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        val = loss()
        val.backward()
        return val

    try:
        opt.step(closure)
    except RuntimeError:  # a start that wanders into a flat region; the other starts remain
        pass
    with torch.no_grad():
        A, B, C_mid, R0 = params()
        mse = float(loss())
    if not math.isfinite(mse):
        mse = math.inf
    return ScalingFit(A=float(A), B=float(B), C_mid=float(C_mid), R0=float(R0), mse=mse, n=int(c.numel()),
                      upper=float(upper), C_max=float(c.max()))


def _clip01(x: float) -> float:
    return min(max(x, 0.01), 0.99)


def fit_study(result, metric: str = "eval/greedy/pass@1", *, x: str = "samples", upper: float = 1.0) -> dict:
    """One ``ScalingFit`` per arm of a ``StudyResult``, on every seed's (x, metric) points pooled.

    ``eval/...`` metrics: each evaluation at its own x (the one at step 0 fixes R0). Training metrics
    (``reward`` ...): step t's batch was sampled by the policy trained on the steps before it, so its
    point sits at the previous step's x (0 for step 1, which then fixes R0). Arms with fewer than 3
    points past zero compute are skipped."""
    out = {}
    is_eval = metric.startswith("eval/")
    key = metric[5:] if is_eval else metric
    for arm in result.arms:
        pts = []
        for run in (r for r in result.runs if r.arm == arm):
            rows = run.evals if is_eval else run.history
            xs = [float(row[x]) for row in rows] if is_eval else [0.0] + [float(row[x]) for row in rows[:-1]]
            pts += [(cx, float(row[key])) for cx, row in zip(xs, rows) if row.get(key) is not None]
        if sum(1 for cx, _ in pts if cx > 0) >= 3:
            out[arm] = fit_sigmoid([p[0] for p in pts], [p[1] for p in pts], upper=upper)
    return out


def seed_fits(result, arm: str, metric: str = "eval/sampled/pass@1") -> dict:
    """ScaleRL's curve fitted to each seed's (samples, metric) evaluations of ``arm`` (step 0 fixes R0):
    seed -> ``ScalingFit``, for the seeds the arm ran."""
    return {r.seed: fit_sigmoid(result.series(arm, r.seed, "eval/samples"), result.series(arm, r.seed, metric))
            for r in result.runs if r.arm == arm}
