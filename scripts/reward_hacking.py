"""Shipped result for notebook 07: GRPO on the broken verifier ``add_loophole``, beta 0 vs 0.5 vs 2, seeds 0, 1, 2.

The study is the preset ``rlnb.studies.reward_hacking`` (arms, seeds and settings fixed before measuring); this script is
its entry point, ``python -m rlnb.studies run reward_hacking``, kept where the chapter names it. One torch thread; the
result is a ``StudyResult`` that ``rlnb.studies.load_result("reward_hacking")`` reads.

    PYTHONPATH=. python scripts/reward_hacking.py            # about 6 minutes on 2 cores
    -> docs/results/reward_hacking.json
    PYTHONPATH=. python scripts/reward_hacking.py --smoke --out /tmp/reward_hacking.json      # seconds: the mechanism only
"""

import sys

from rlnb.studies.cli import main

if __name__ == "__main__":
    sys.exit(main(["run", "reward_hacking", *sys.argv[1:]]))
