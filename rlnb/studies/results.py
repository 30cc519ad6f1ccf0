"""The one format of a study's result (``RunResult``, ``StudyResult``: JSON, optionally gzipped), and the measured
full-size studies shipped with the repository in it (``docs/results/<name>.json.gz`` or ``.json``).

The notebooks run a reduced version of each study live and load the full 3-seed result to show the
whole picture without half an hour of training: ``load_result("beta")``. The files live next to the
package in a clone (``<repo>/docs/results``), not inside it; ``RLNB_RESULTS`` or ``root=`` points
elsewhere (e.g. an installed package with the folder copied somewhere).
"""

from __future__ import annotations

import copy
import gzip
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rlnb.studies.summary import Stat, Table, reduce_run, series


@dataclass
class RunResult:
    """One (arm, seed) run: per-step metrics and evaluations. Besides the Trainer's metrics, each step
    records the cumulative ``samples``, ``tokens`` (completion tokens of the update batches plus the Monte-Carlo
    continuations a valuer sampled) and ``wall_s``, and ``groups`` / ``groups_with_signal``: the groups in the
    update and those whose rewards are not all equal (GRPO's effective signal). Each evaluation records
    ``step``, ``samples``, ``tokens`` and ``wall_s`` (training time so far) beside its scores. ``info``: what
    belongs to the whole run (``load``: the machine's load average as it ended, beside its wall times)."""

    arm: str
    seed: int
    history: list[dict]
    evals: list[dict] = field(default_factory=list)
    wall_s: float = 0.0          # training time, evaluations excluded
    eval_s: float = 0.0
    info: dict = field(default_factory=dict)


class StudyResult:
    """All runs of a study. ``summary()`` -> table of mean ± std over seeds; ``value(arm, spec)`` and
    ``diff(a, b, spec)`` -> a ``Stat`` per seed; ``curves(metric)`` for plots; ``to_json``/``from_json``."""

    def __init__(self, runs: list[RunResult], config: dict):
        self.runs, self.config = list(runs), dict(config)

    @property
    def arms(self) -> list[str]:
        return list(dict.fromkeys(r.arm for r in self.runs))

    @property
    def seeds(self) -> list[int]:
        return list(dict.fromkeys(r.seed for r in self.runs))

    def run(self, arm: str, seed: int) -> RunResult:
        for r in self.runs:
            if r.arm == arm and r.seed == seed:
                return r
        raise KeyError(f"run: no run for arm={arm!r}, seed={seed!r}; arms {self.arms}, seeds {self.seeds}")

    def value(self, arm: str, spec: str, *, window: int | None = None) -> Stat:
        """The spec reduced on each seed's run of ``arm`` (seeds in study order)."""
        w = window or self.config.get("window", 1)
        runs = [r for r in self.runs if r.arm == arm]
        if not runs:
            raise KeyError(f"arm: unknown arm {arm!r}; known: {self.arms}")
        return Stat(tuple(reduce_run(r.history, r.evals, spec, window=w) for r in runs))

    def diff(self, arm_a: str, arm_b: str, spec: str, *, window: int | None = None) -> Stat:
        """Per-seed paired difference a - b on the seeds both arms ran (same seed = same prompts and
        same starting model, so the pair removes much of the seed-to-seed noise)."""
        w = window or self.config.get("window", 1)
        common = [s for s in self.seeds if any(r.arm == arm_a and r.seed == s for r in self.runs)
                  and any(r.arm == arm_b and r.seed == s for r in self.runs)]
        one = lambda arm, s: reduce_run(self.run(arm, s).history, self.run(arm, s).evals, spec, window=w)  # noqa: E731
        return Stat(tuple(one(arm_a, s) - one(arm_b, s) for s in common))

    def summary(self, specs=("final:reward", "final:entropy"), *, window: int | None = None, digits: int = 3) -> Table:
        """A ``Table`` of mean ± std [min, max] over seeds, per arm and spec (see ``summary.parse_spec``)."""
        specs = [specs] if isinstance(specs, str) else list(specs)
        stats = {(a, s): self.value(a, s, window=window) for a in self.arms for s in specs}
        return Table(self.arms, specs, stats, digits=digits)

    def curves(self, metric: str, *, x: str = "step", smooth: int = 1) -> dict[str, dict]:
        """Per arm: ``x`` (step or samples, averaged over seeds), ``mean``/``std`` over seeds, and
        ``per_seed`` values, at the points every seed has. ``eval/<key>`` reads the evaluations.
        ``smooth`` > 1 takes a trailing running mean over that many points first."""
        if x not in ("step", "samples", "tokens", "wall_s"):
            raise ValueError(f"x: expected 'step', 'samples', 'tokens' or 'wall_s', got {x!r}")
        out = {}
        for arm in self.arms:
            runs = [r for r in self.runs if r.arm == arm]
            rows = [r.evals if metric.startswith("eval/") else r.history for r in runs]
            key = metric[5:] if metric.startswith("eval/") else metric
            n = min(len(rs) for rs in rows)
            keep = [i for i in range(n) if all(rs[i].get(key) is not None for rs in rows)]
            per_seed = {r.seed: _smooth([float(rs[i][key]) for i in keep], smooth) for r, rs in zip(runs, rows)}
            xs = [sum(float(rs[i].get(x, 0.0)) for rs in rows) / len(rows) for i in keep]
            vals = list(zip(*per_seed.values()))
            out[arm] = {"x": xs, "mean": [Stat(v).mean for v in vals], "std": [Stat(v).std for v in vals],
                        "per_seed": per_seed}
        return out

    def series(self, arm: str, seed: int, metric: str) -> list[float]:
        r = self.run(arm, seed)
        return series(r.history, r.evals, metric)

    # --- persistence ----------------------------------------------------------------------------
    def to_json(self, path=None, *, digits: int | None = None) -> str:
        """The config and every run as JSON (written to ``path`` if given, gzipped if it ends in ``.gz``);
        ``digits`` rounds floats."""
        data = {"config": self.config, "runs": [asdict(r) for r in self.runs]}
        text = json.dumps(round_floats(data, digits) if digits is not None else data)
        if path is not None:
            if str(path).endswith(".gz"):
                with gzip.open(path, "wt", encoding="utf-8") as f:
                    f.write(text)
            else:
                Path(path).write_text(text)
        return text

    @classmethod
    def from_json(cls, text_or_path) -> StudyResult:
        """From a JSON string or a file (``.json`` or ``.json.gz``)."""
        text = str(text_or_path)
        if text.endswith(".gz"):
            with gzip.open(text_or_path, "rt", encoding="utf-8") as f:
                text = f.read()
        elif not text.lstrip().startswith("{"):
            text = Path(text_or_path).read_text()
        data = json.loads(text)
        return cls([RunResult(**r) for r in data["runs"]], data["config"])

    @classmethod
    def merge(cls, *results: StudyResult) -> StudyResult:
        """One result from several (e.g. arms or seeds run in separate processes)."""
        if not results:
            raise ValueError("results: expected at least one StudyResult")
        seen: dict = {}
        for i, r in enumerate(results):  # the same (arm, seed) twice would count one run as two seeds
            if not isinstance(r, StudyResult):
                raise TypeError(f"results[{i}]: expected a StudyResult, got {type(r).__name__}")
            for run in r.runs:
                if (run.arm, run.seed) in seen:
                    raise ValueError(f"results[{i}]: arm {run.arm!r} seed {run.seed} is already in "
                                     f"results[{seen[run.arm, run.seed]}]; merge distinct runs only")
                seen[run.arm, run.seed] = i
        config = copy.deepcopy(results[0].config)
        for r in results[1:]:
            config["arms"] = {**config.get("arms", {}), **r.config.get("arms", {})}
            config["seeds"] = list(dict.fromkeys([*config.get("seeds", []), *r.config.get("seeds", [])]))
        return cls([run for r in results for run in r.runs], config)

    def __repr__(self) -> str:
        return f"StudyResult({self.config.get('name')!r}, arms={self.arms}, seeds={self.seeds})"


def round_floats(obj, digits: int):
    """``obj`` with every float rounded to ``digits`` decimals, as ``to_json(digits=...)`` saves it.

    >>> round_floats({"eval_every": 100000 / 6, "arms": (0.123456789, 3)}, 5)
    {'eval_every': 16666.66667, 'arms': [0.12346, 3]}
    """
    if isinstance(obj, float):
        return round(obj, digits)
    if isinstance(obj, dict):
        return {k: round_floats(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [round_floats(v, digits) for v in obj]
    return obj


def _smooth(values: list[float], w: int) -> list[float]:
    if w <= 1:
        return values
    return [sum(values[max(0, i - w + 1) : i + 1]) / len(values[max(0, i - w + 1) : i + 1]) for i in range(len(values))]


SUFFIXES = (".json.gz", ".json")


def results_dir(root=None) -> Path:
    """``root`` if given, else ``$RLNB_RESULTS`` if set, else ``docs/results`` of the course folder (this checkout,
    or the copied course a wheelhouse install runs in: ``rlnb.notebook.course_path``)."""
    if root is not None:
        return Path(root)
    if os.environ.get("RLNB_RESULTS"):
        return Path(os.environ["RLNB_RESULTS"])
    from rlnb.notebook import course_path

    return course_path("docs/results")


def result_names(root=None) -> list[str]:
    """The stored results in ``results_dir(root)`` (names without suffix), sorted; [] if there is none."""
    folder = results_dir(root)
    if not folder.is_dir():
        return []
    return sorted({p.name[: -len(s)] for p in folder.iterdir() for s in SUFFIXES if p.name.endswith(s)})


def load_result(name: str, *, root=None) -> StudyResult:
    """The stored ``StudyResult`` called ``name`` (``<name>.json.gz`` or ``<name>.json``).

    Raises FileNotFoundError naming the folder searched and the results it holds, so a notebook run
    outside a clone says what is missing rather than failing somewhere later.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"name: expected a study name such as 'beta', got {name!r}")
    folder = results_dir(root)
    for suffix in SUFFIXES:
        path = folder / f"{name}{suffix}"
        if path.is_file():
            return _read(path)
    known = result_names(root)
    where = "it does not exist" if not folder.is_dir() else f"it holds {known}"
    raise FileNotFoundError(
        f"name: no stored result {name!r} in {folder} ({where}). The measured results ship with the "
        "repository in docs/results; run from a clone, or set RLNB_RESULTS to a folder holding them.")


def _read(path: Path) -> StudyResult:
    """``path`` as a StudyResult; ``ValueError`` naming the file and what is wrong with it (a cut-short copy, a
    ``.gz`` that is not gzip, JSON of another shape), so a notebook or the README's table says which file."""
    try:
        return StudyResult.from_json(path)
    except (KeyError, TypeError) as e:
        raise ValueError(f"name: {path} is not a StudyResult (no 'runs' of arm/seed results)") from e
    except EOFError:  # gzip's stream ended before its end marker
        raise ValueError(f"name: {path} is cut short (the gzip stream ends early); restore it from the "
                         "repository") from None
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:  # BadGzipFile is an OSError
        raise ValueError(f"name: {path} cannot be read as {'gzipped ' if path.name.endswith('.gz') else ''}JSON "
                         f"({type(e).__name__}: {str(e)[:120]}); it is cut short or corrupt: restore it from the "
                         "repository") from None
