"""Moved to ``rlnb.studies.scaling``. This alias keeps notebooks that import ``rlnb.scaling`` working for one release,
with a warning naming the new path."""

import importlib
import sys
import warnings

warnings.warn("rlnb.scaling moved to rlnb.studies.scaling; import it from there (the old path goes in the next release)",
              FutureWarning, stacklevel=2)
sys.modules[__name__] = importlib.import_module("rlnb.studies.scaling")
