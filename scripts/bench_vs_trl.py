"""Entry point of ``rlnb.bench.vs_trl`` (``python -m rlnb.bench trl``), kept at the path the README and docs name.

    python scripts/bench_vs_trl.py --help
"""

import sys

from rlnb.bench.vs_trl import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
