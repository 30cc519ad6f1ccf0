"""Five training-level claims of the source articles given a second, designed attempt (issue 28): the entry point of
``rlnb.studies.second_attempt`` (settings, seeds, decision rule and the seed-major queue are there).

    PYTHONPATH=. nice -n 15 python scripts/claim_studies.py                 # the whole queue, in order
    PYTHONPATH=. python scripts/claim_studies.py entropy_mu4 --seeds 0 1    # one study, some seeds
    PYTHONPATH=. python scripts/claim_studies.py --check                    # 3 steps at P = G = 4 into /tmp
"""

import sys

from rlnb.studies.second_attempt import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
