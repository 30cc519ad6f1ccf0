"""Shipped result for notebook 06: entropy collapses with the clip on and mu = 1, where the clip never fires.

The study is the preset ``rlnb.studies.entropy_clip`` (arms, seeds and settings fixed before measuring); this script is
its entry point, ``python -m rlnb.studies run entropy_clip``, kept where the chapter names it. One torch thread; the
result is a ``StudyResult`` that ``rlnb.studies.load_result("entropy_clip")`` reads.

    PYTHONPATH=. python scripts/entropy_clip.py            # about 20-30 minutes on 2 shared cores
    -> docs/results/entropy_clip.json.gz
    PYTHONPATH=. python scripts/entropy_clip.py --smoke --out /tmp/entropy_clip.json      # seconds: the mechanism only
"""

import sys

from rlnb.studies.cli import main

if __name__ == "__main__":
    sys.exit(main(["run", "entropy_clip", *sys.argv[1:]]))
