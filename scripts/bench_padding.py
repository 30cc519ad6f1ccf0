"""Entry point of ``rlnb.bench.padding`` (``python -m rlnb.bench padding``), kept at the path the README and docs name.

    python scripts/bench_padding.py --help
"""

import sys

from rlnb.bench.padding import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
