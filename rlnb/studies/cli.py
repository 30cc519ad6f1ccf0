"""``python -m rlnb.studies``: list the studies, or run one and write its result where ``load_result`` reads it.

    python -m rlnb.studies list
    python -m rlnb.studies run reward_hacking                 # the full study -> docs/results/reward_hacking.json
    python -m rlnb.studies run credit_race --seeds 0 --smoke --out /tmp/race.json

A study is run on one torch thread by default: on a shared CPU one thread is faster and steadier than two. The
output keeps the name of the file already shipped (``.json`` or ``.json.gz``); a new study writes ``.json.gz``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rlnb.studies.presets import get, names
from rlnb.studies.results import SUFFIXES, StudyResult, results_dir


def default_out(name: str) -> Path:
    """The shipped file of study ``name`` if there is one, else ``<results_dir>/<name>.json.gz``."""
    folder = results_dir()
    for suffix in SUFFIXES:
        if (folder / f"{name}{suffix}").is_file():
            return folder / f"{name}{suffix}"
    return folder / f"{name}.json.gz"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m rlnb.studies", description=__doc__.split("\n")[0], allow_abbrev=False)
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the studies, one line each")
    run = sub.add_parser("run", help="run one study and write its result")
    run.add_argument("name", choices=names())
    run.add_argument("--seeds", type=int, nargs="+", default=None, help="default: the study's own")
    run.add_argument("--smoke", action="store_true", help="the seconds-long size (checks the mechanism only)")
    run.add_argument("--out", default=None, help="default: the shipped file of that name in docs/results")
    run.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    run.add_argument("--digits", type=int, default=5, help="round floats to this many digits in the file")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.command == "list":
        for n in names():
            print(get(n, smoke=False).describe().splitlines()[0])
        return 0
    import torch

    torch.set_num_threads(args.threads)
    study, t0 = get(args.name, smoke=args.smoke), time.perf_counter()
    result = study.run(seeds=args.seeds, progress=sys.stderr.isatty())
    out = Path(args.out) if args.out else default_out(args.name)
    if isinstance(result, StudyResult):
        result.to_json(out, digits=args.digits)
        print(result.summary(study.specs or ("final:reward",)))
    else:  # group_size keeps its own rows (GroupSizeResult)
        result.to_json(out)
    print(f"wrote {out} in {time.perf_counter() - t0:.0f} s")
    return 0
