"""Race every recipe on the same seeds and the same sample budget; print a markdown table, write JSON (a
``StudyResult``: the shipped ``bench_recipes_add60`` is one). ``scripts/bench_recipes.py`` is this module's entry point;
``studies.zoo_race()`` is the small preset of the same race.

    PYTHONPATH=. python scripts/bench_recipes.py --task add --steps 80 --seeds 0,1 --out bench.json
    PYTHONPATH=. python scripts/bench_recipes.py --from-json bench.json      # the table again, no training

Every recipe samples steps * P * G completions (recipes that resample, like DAPO, take fewer steps).
Columns: held-out greedy pass@1 and sampled pass@1 / pass@k at the end (mean ± std over seeds, change
from the start in brackets), final token entropy, training wall time (evaluations excluded; the machine
may be shared, so wall times are noisy), and ScaleRL's fitted asymptote A and efficiency B of held-out
sampled pass@1 (the expected reward, what the paper fits) against samples (rlnb.studies.scaling; every seed's
evaluations pooled, R0 fixed by the step-0 value; ``--fit-metric`` picks another).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

from rlnb import recipes
from rlnb.studies.results import StudyResult
from rlnb.studies.runner import run_study
from rlnb.studies.scaling import fit_study


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="scripts/bench_recipes.py", description=__doc__.split("\n")[0], allow_abbrev=False)
    p.add_argument("--task", default="add", help="task name (default add)")
    p.add_argument("--steps", type=int, default=80, help="sample budget in GRPO steps: steps * P * G completions")
    p.add_argument("--seeds", default="0,1", help="comma-separated seeds, the same for every recipe")
    p.add_argument("--recipes", default="all", help="comma-separated recipe names, or 'all'")
    p.add_argument("--prompts-per-step", type=int, default=16, help="P")
    p.add_argument("--num-generations", type=int, default=8, help="G")
    p.add_argument("--eval-every", type=int, default=10, help="evaluate every so many steps' worth of samples")
    p.add_argument("--eval-n", type=int, default=200, help="held-out prompts for greedy pass@1")
    p.add_argument("--eval-sampled-n", type=int, default=100, help="held-out prompts for sampled pass@1 / pass@k")
    p.add_argument("--k", type=int, default=8, help="k of pass@k")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1 is fastest on a shared machine)")
    p.add_argument("--out", default="bench_recipes.json", help="JSON written after every run")
    p.add_argument("--fit-metric", default="eval/sampled/pass@1", help="the curve ScaleRL's fit is fitted to")
    p.add_argument("--from-json", default=None, help="print the table of a saved result and exit")
    return p.parse_args(argv)


def table(res: StudyResult, fit_metric: str = "eval/sampled/pass@1") -> str:
    k = res.config.get("eval_k", 8)
    fits = fit_study(res, fit_metric, x="samples")
    head = ["recipe", "greedy pass@1", "sampled pass@1", f"pass@{k}", "entropy", "train s", "A", "B"]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for arm in res.arms:
        cells = [f"`{arm}`"]
        for metric in ("eval/greedy/pass@1", "eval/sampled/pass@1", f"eval/sampled/pass@{k}"):
            end, gain = res.value(arm, f"final:{metric}"), res.value(arm, f"change:{metric}")
            cells.append(f"{end.mean:.3f} ± {end.std:.3f} ({gain.mean:+.3f})")
        cells.append(f"{res.value(arm, 'final:entropy').mean:.3f}")
        cells.append(f"{sum(r.wall_s for r in res.runs if r.arm == arm) / len(res.seeds):.0f}")
        fit = fits.get(arm)
        cells += [f"{fit.A:.3f}{'*' if fit.extrapolated else ''}", f"{fit.B:.2f}"] if fit else ["-", "-"]
        lines.append("| " + " | ".join(cells) + " |")
    if any(f.extrapolated for f in fits.values()):
        lines.append("\n\\* extrapolated: A at its bound 1.0 or C_mid beyond the last point (less than half of the "
                     "gain observed), so the asymptote is not determined by the data.")
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.from_json:
        print(table(StudyResult.from_json(args.from_json), args.fit_metric))
        return 0
    torch.set_num_threads(args.threads)
    names = recipes.names() if args.recipes == "all" else args.recipes.split(",")
    for n in names:
        recipes.get(n)  # unknown names fail before any training
    seeds = [int(s) for s in args.seeds.split(",")]
    common = dict(task=args.task, steps=args.steps, match_samples=True, eval_every=args.eval_every,
                  eval_n=args.eval_n, eval_sampled_n=args.eval_sampled_n, eval_k=args.k,
                  prompts_per_step=args.prompts_per_step, num_generations=args.num_generations)
    parts, t0 = [], time.time()
    for name in names:
        for seed in seeds:
            t1 = time.time()
            parts.append(run_study({name: {"recipe": name}}, seeds=[seed], progress=False, name="bench_recipes",
                                   **common))
            res = StudyResult.merge(*parts)
            res.config.update(total_s=round(time.time() - t0, 1), command=" ".join(sys.argv),
                              load_avg=os.getloadavg())
            res.to_json(args.out)
            print(f"{name} seed {seed}: {time.time() - t1:.0f} s", file=sys.stderr, flush=True)
    print(table(StudyResult.from_json(args.out), args.fit_metric))
    print(f"\n{len(names)} recipes x {len(seeds)} seeds, {args.steps} steps' worth of samples each, "
          f"{time.time() - t0:.0f} s in all; JSON in {args.out}")
    return 0
