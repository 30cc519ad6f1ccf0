"""Shipped result for notebook 04: PPO with a critic vs GRPO at equal samples on the default model, seeds 0, 1, 2.

The study is the preset ``rlnb.studies.ppo_vs_grpo`` (arms, seeds and settings fixed before measuring); this script is
its entry point, ``python -m rlnb.studies run ppo_vs_grpo``, kept where the chapter names it. One torch thread; the
result is a ``StudyResult`` that ``rlnb.studies.load_result("ppo_vs_grpo")`` reads.

    PYTHONPATH=. python scripts/ppo_vs_grpo.py            # tens of minutes on a busy 2-core machine
    -> docs/results/ppo_vs_grpo.json
    PYTHONPATH=. python scripts/ppo_vs_grpo.py --smoke --out /tmp/ppo_vs_grpo.json      # seconds: the mechanism only
"""

import sys

from rlnb.studies.cli import main

if __name__ == "__main__":
    sys.exit(main(["run", "ppo_vs_grpo", *sys.argv[1:]]))
