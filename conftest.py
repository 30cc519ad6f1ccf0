"""Root conftest: notebooks collected by nbval run in smoke mode unless RLNB_SMOKE is set explicitly."""

import os

os.environ.setdefault("RLNB_SMOKE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# nbval's kernels inherit this environment: without a passive OpenMP wait policy, two-thread torch in a
# kernel on a busy 2-core machine spins at every barrier (measured up to 30x slower).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def pytest_configure(config):
    """Under pytest-xdist (``make test`` runs two workers, one module or notebook per worker at a time) each
    worker already fills one core: its notebook kernels get one thread too."""
    if hasattr(config, "workerinput"):
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        os.environ.setdefault("MKL_NUM_THREADS", "1")

