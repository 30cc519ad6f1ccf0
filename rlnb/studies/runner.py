"""``run_study``: train every arm on every seed (the same seeds for every arm) and keep what happened.

An *arm* is a dict of ``Recipe`` overrides (plus, optionally, ``"recipe"``: another base recipe). Each
(arm, seed) run is ``Trainer.tiny(recipe, task=task, seed=seed, **common, **arm)``, trained for
``steps`` steps (or, with ``match_samples``, until it has sampled ``steps * P * G`` completions, so
recipes that resample, like DAPO's dynamic sampling, spend the same sample budget). Held-out
evaluations run at step 0, every ``eval_every`` steps' worth of samples, and at the end.
"""

from __future__ import annotations

import copy
import gzip
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from rlnb.loop import Trainer
from rlnb.studies.probes import kl_to_reference
from rlnb.studies.summary import Stat, Table, reduce_run, series


@dataclass
class RunResult:
    """One (arm, seed) run: per-step metrics and evaluations. Besides the Trainer's metrics, each step
    records the cumulative ``samples`` and ``wall_s``, and ``groups`` / ``groups_with_signal``: the
    groups in the update and those whose rewards are not all equal (GRPO's effective signal)."""

    arm: str
    seed: int
    history: list[dict]
    evals: list[dict] = field(default_factory=list)
    wall_s: float = 0.0          # training time, evaluations excluded
    eval_s: float = 0.0


def _scalars(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if v is None or isinstance(v, (int, float))}


def _evaluate(trainer: Trainer, init_model, *, samples: int, eval_n: int, eval_sampled_n: int, eval_k: int) -> dict:
    ev = {"step": trainer.step_count, "samples": samples}
    if eval_n:
        g = trainer.evaluate(eval_n, greedy=True)
        ev.update({"greedy/pass@1": g["pass@1"], "greedy/mean_length": g["mean_length"]})
    if eval_sampled_n:
        s = trainer.evaluate(eval_sampled_n, greedy=False, k=eval_k)
        ev.update({f"sampled/{k}": v for k, v in s.items()})
    if init_model is not None:  # exact KL to the starting model on the last training batch (0 at step 0)
        ev["kl_to_init"] = kl_to_reference(trainer.model, init_model, trainer.records[-1].batch,
                                           temperature=trainer.recipe.temperature) if trainer.records else 0.0
    return ev


def run_one(arm: str, overrides: dict, *, task, seed: int, steps: int, base_recipe="grpo", eval_every: int = 0,
            eval_n: int = 0, eval_sampled_n: int = 0, eval_k: int = 8, kl_to_init: bool = False,
            match_samples: bool = False, on_step=None, **common) -> RunResult:
    """Train one arm on one seed; see ``run_study`` for the arguments."""
    over = {**common, **overrides}
    recipe = over.pop("recipe", base_recipe)
    trainer = Trainer.tiny(recipe, task=task, seed=seed, **over)
    per_step = trainer.recipe.prompts_per_step * trainer.recipe.num_generations
    init_model = copy.deepcopy(trainer.model).eval().requires_grad_(False) if kl_to_init else None
    evaluating = bool(eval_n or eval_sampled_n or kl_to_init)
    res, samples, next_eval = RunResult(arm, seed, []), 0, 0

    def do_eval():
        nonlocal next_eval
        t0 = time.perf_counter()
        res.evals.append(_evaluate(trainer, init_model, samples=samples, eval_n=eval_n,
                                   eval_sampled_n=eval_sampled_n, eval_k=eval_k))
        res.eval_s += time.perf_counter() - t0
        while next_eval <= samples:  # the next multiple of eval_every steps' worth of samples
            next_eval += max(eval_every, 1) * per_step

    if evaluating:
        do_eval()
    while (samples < steps * per_step) if match_samples else (trainer.step_count < steps):
        t0 = time.perf_counter()
        rec = trainer.step()
        res.wall_s += time.perf_counter() - t0
        samples += int(rec.metrics.get("gen_rounds", 1)) * per_step
        groups = rec.batch.P  # groups in the update (dynamic sampling may bring fewer than P)
        signal = round(groups * (1 - rec.metrics["frac_reward_zero_std"]))
        res.history.append({**_scalars(rec.metrics), "samples": samples, "wall_s": round(res.wall_s, 4),
                            "groups": groups, "groups_with_signal": signal})
        if on_step is not None:
            on_step(rec)
        if evaluating and eval_every and samples >= next_eval:
            do_eval()
    if evaluating and res.evals[-1]["samples"] < samples:  # always end with an evaluation
        do_eval()
    return res


def run_study(arms: dict[str, dict], *, task, seeds, steps: int, base_recipe="grpo", eval_every: int = 0,
              eval_n: int = 0, eval_sampled_n: int = 0, eval_k: int = 8, kl_to_init: bool = False,
              match_samples: bool = False, window: int | None = None, progress: bool = True,
              name: str = "study", **common) -> StudyResult:
    """Run every arm on every seed and return a ``StudyResult``.

    ``arms``: name -> Recipe overrides (``"recipe"`` picks another base recipe for that arm).
    ``common``: overrides shared by all arms (``prompts_per_step``, ``num_generations``, ``lr`` ...).
    ``eval_n``: held-out prompts for greedy pass@1; ``eval_sampled_n``: prompts for sampled pass@1 and
    pass@``eval_k`` (``eval_k`` samples each); ``eval_every``: evaluate every so many steps' worth of
    samples (0: only at step 0 and at the end). ``kl_to_init``: also measure the exact KL to the starting
    model at each evaluation (``probes.kl_to_reference``). ``window``: steps averaged by the summary's
    ``start``/``final`` (default: a tenth of ``steps``).
    """
    if not isinstance(arms, dict) or not arms or not all(isinstance(v, dict) for v in arms.values()):
        raise ValueError(f"arms: expected a non-empty dict of name -> dict of recipe overrides, got {arms!r}")
    seeds = [seeds] if isinstance(seeds, int) else list(seeds)
    if not seeds or not all(isinstance(s, int) for s in seeds):
        raise ValueError(f"seeds: expected a non-empty list of ints, got {seeds!r}")
    if len(set(seeds)) != len(seeds):  # a repeated seed is the same run again: it would narrow the intervals
        raise ValueError(f"seeds: expected distinct seeds, got {seeds!r} (repeated: "
                         f"{sorted({s for s in seeds if seeds.count(s) > 1})})")
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps: expected a positive int, got {steps!r}")
    from tqdm.auto import tqdm

    kw = dict(task=task, steps=steps, base_recipe=base_recipe, eval_every=eval_every, eval_n=eval_n,
              eval_sampled_n=eval_sampled_n, eval_k=eval_k, kl_to_init=kl_to_init, match_samples=match_samples)
    config = {"name": name, **kw, "task": getattr(task, "name", task), "seeds": seeds, "arms": arms,
              "common": common, "window": window or max(1, steps // 10), "torch_threads": torch.get_num_threads()}
    bar = tqdm(total=len(arms) * len(seeds) * steps, disable=not progress, desc=name)
    runs = []
    try:
        for arm, overrides in arms.items():
            for seed in seeds:
                bar.set_postfix(arm=arm, seed=seed, refresh=True)
                runs.append(run_one(arm, overrides, seed=seed, on_step=lambda r: bar.update(1), **kw, **common))
                bar.update(max(0, len(runs) * steps - bar.n))  # a run that met its sample budget early is done
    finally:
        bar.close()
    return StudyResult(runs, config)


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
        if x not in ("step", "samples", "wall_s"):
            raise ValueError(f"x: expected 'step', 'samples' or 'wall_s', got {x!r}")
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
        text = json.dumps(_round(data, digits) if digits is not None else data)
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


def _round(obj, digits: int):
    if isinstance(obj, float):
        return round(obj, digits)
    if isinstance(obj, dict):
        return {k: _round(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_round(v, digits) for v in obj]
    return obj


def _smooth(values: list[float], w: int) -> list[float]:
    if w <= 1:
        return values
    return [sum(values[max(0, i - w + 1) : i + 1]) / len(values[max(0, i - w + 1) : i + 1]) for i in range(len(values))]
