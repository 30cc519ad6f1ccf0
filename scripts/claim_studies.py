"""Train the claim studies and print each claim's verdict beside the shipped one (``rlnb.studies.claim_cli``; the
settings are in ``rlnb.studies.third_attempt`` and ``second_attempt``, the plans in docs/results/plans.json).

    PYTHONPATH=. python scripts/claim_studies.py entropy_third --fresh --out /tmp/e3   # from scratch into /tmp/e3
    PYTHONPATH=. nice -n 15 python scripts/claim_studies.py --resume                   # continue the third attempts
    PYTHONPATH=. python scripts/claim_studies.py beta_third --fresh --out /tmp/b --smoke  # seconds: does it run?
"""

import sys

from rlnb.studies.claim_cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
