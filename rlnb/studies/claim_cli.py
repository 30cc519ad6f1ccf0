"""``scripts/claim_studies.py``: train the claim studies (second attempts, third attempts, pilots) and print each
claim's verdict from what was just trained beside the shipped one.

    PYTHONPATH=. python scripts/claim_studies.py entropy_third --fresh --out /tmp/e3   # from scratch into /tmp/e3
    PYTHONPATH=. nice -n 15 python scripts/claim_studies.py --resume                   # continue the third attempts
    PYTHONPATH=. python scripts/claim_studies.py beta_third --fresh --out /tmp/b --smoke  # seconds: does it run?

A re-run re-runs: without ``--resume`` nothing saved is reused, and a file already at the output is refused.
``--fresh`` needs ``--out`` (the shipped files in docs/results stay as they are); ``--resume`` continues a
half-finished queue in its output folder (default docs/results), keeping the runs saved for the same setting.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def tables() -> tuple[dict, dict]:
    from rlnb.studies import second_attempt, third_attempt

    return second_attempt.STUDIES, third_attempt.studies()


def parser(second: dict, third: dict) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="scripts/claim_studies.py", description=__doc__.splitlines()[0],
                                allow_abbrev=False)
    p.add_argument("studies", nargs="*", help=f"some of {list(third)} (the third attempts, default: all, in this "
                   f"order) or {list(second)} (the second attempts)")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--fresh", action="store_true", help="train every run from scratch into --out")
    mode.add_argument("--resume", action="store_true", help="continue: keep the runs saved in the output folder")
    p.add_argument("--out", default=None, help="output folder (default docs/results; --fresh needs one)")
    p.add_argument("--seeds", type=int, nargs="+", default=None, help="default: the plan's (third), 0-4 (second)")
    p.add_argument("--smoke", action="store_true", help="3 steps at P = G = 4, one seed: does the pipeline run?")
    p.add_argument("--pilots", action="store_true", help="run the pilots (seeds 100+) into docs/results/pilots")
    return p


def verdicts(names, out: Path) -> list[str]:
    """Each claim a study tests: its verdict from ``out`` beside the shipped verdict."""
    from rlnb.studies.claims import CLAIMS, describe
    from rlnb.studies.decide import load_plans
    from rlnb.studies.planned import judge

    plans, lines = load_plans(), []
    for c in CLAIMS:
        if not c.plan or c.plan not in plans:
            continue
        plan, written, _ = plans[c.plan]
        ev = c.evidence
        where = [n for n in names if n in (plan.file, getattr(ev, "file", None))]
        for n in where:
            arm, control = (plan.arm, plan.control) if n == plan.file else (ev.arm, ev.control)
            try:
                dec, label = judge(plan, n, arm, control, written, root=out)
            except (FileNotFoundError, KeyError) as e:
                lines.append(f"- {c.text}: not judged ({e})")
                continue
            lines.append(f"- {c.text}\n    this run: {dec.line} ({label})\n    shipped:  {describe(c)['line']}")
    return lines


def main(argv: list[str] | None = None) -> int:
    import torch

    second, third = tables()
    p = parser(second, third)
    args = p.parse_args(argv)
    unknown = set(args.studies) - set(second) - set(third)
    if unknown:
        p.error(f"unknown studies {sorted(unknown)}; known: {list(third) + list(second)}")
    if args.fresh and args.out is None:
        p.error("--fresh: give --out DIR (the shipped results in docs/results are not overwritten)")
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    log = lambda line: print(line, flush=True)  # noqa: E731
    if args.pilots:
        from rlnb.studies.third_attempt import run_pilots

        run_pilots(args.studies or None, seeds=args.seeds or (100, 101))
        return 0
    from rlnb.studies.results import results_dir
    from rlnb.studies.second_attempt import SEEDS, run_queue
    from rlnb.studies.third_attempt import planned_seeds

    names = args.studies or list(third)
    out = Path(args.out) if args.out else results_dir()
    table = {**second, **third}
    seeds = {n: tuple(args.seeds) if args.seeds else planned_seeds(n) if n in third else SEEDS for n in names}
    try:
        run_queue(table, seeds, out=out, resume=args.resume, smoke=args.smoke, log=log)
    except FileExistsError as e:
        p.error(str(e))
    log(f"done in {time.perf_counter() - t0:.0f} s (this process: training, evaluation and saving)")
    for line in verdicts(names, out):
        log(line)
    return 0
