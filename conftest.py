"""Root conftest: notebooks collected by nbval run in smoke mode unless RLNB_SMOKE is set explicitly."""

import os

os.environ.setdefault("RLNB_SMOKE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# nbval's kernels inherit this environment: without a passive OpenMP wait policy, two-thread torch in a
# kernel on a busy 2-core machine spins at every barrier (measured up to 30x slower).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
