"""Moved to ``rlnb.run.evaluate``. This alias keeps notebooks that import ``rlnb.evaluate`` working for one release,
with a warning naming the new path."""

import importlib
import sys
import warnings

warnings.warn("rlnb.evaluate moved to rlnb.run.evaluate; import it from there (the old path goes in the next release)",
              FutureWarning, stacklevel=2)
sys.modules[__name__] = importlib.import_module("rlnb.run.evaluate")
