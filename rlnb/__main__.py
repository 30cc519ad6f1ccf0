import sys

from rlnb.cli import main

sys.exit(main())
