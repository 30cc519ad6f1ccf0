"""The recipe race: every recipe on the same seeds and sample budget, a markdown table and a JSON ``StudyResult``;
the entry point of ``rlnb.studies.race``.

    PYTHONPATH=. python scripts/bench_recipes.py --task add --steps 80 --seeds 0,1 --out bench.json
    PYTHONPATH=. python scripts/bench_recipes.py --from-json bench.json      # the table again, no training
"""

import sys

from rlnb.studies.race import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
