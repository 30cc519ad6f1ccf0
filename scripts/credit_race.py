"""Shipped result for notebook 09: does finer credit learn faster? VinePPO vs GRPO at equal sampled tokens, seeds 0, 1, 2.

The study is the preset ``rlnb.studies.credit_race`` (arms, seeds and settings fixed before measuring); this script is
its entry point, ``python -m rlnb.studies run credit_race``, kept where the chapter names it. One torch thread; the
result is a ``StudyResult`` that ``rlnb.studies.load_result("credit_race")`` reads.

    PYTHONPATH=. python scripts/credit_race.py            # about 20 minutes on a busy 2-core machine
    -> docs/results/credit_race.json
    PYTHONPATH=. python scripts/credit_race.py --smoke --out /tmp/credit_race.json      # seconds: the mechanism only
"""

import sys

from rlnb.studies.cli import main

if __name__ == "__main__":
    sys.exit(main(["run", "credit_race", *sys.argv[1:]]))
