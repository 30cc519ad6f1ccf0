"""Moved to ``rlnb.models.forward``. This alias keeps notebooks that import ``rlnb.forward`` working for one release,
with a warning naming the new path."""

import importlib
import sys
import warnings

warnings.warn("rlnb.forward moved to rlnb.models.forward; import it from there (the old path goes in the next release)",
              FutureWarning, stacklevel=2)
sys.modules[__name__] = importlib.import_module("rlnb.models.forward")
