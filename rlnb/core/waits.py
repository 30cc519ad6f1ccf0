"""How OpenMP's threads wait, read from the environment as GNU OpenMP reads it (torch-free: ``rlnb doctor`` reads it
before torch loads, ``rlnb.models.threads`` when it decides a decode's threads)."""

from __future__ import annotations

from collections.abc import Mapping


def spinning(environ: Mapping[str, str]) -> bool:
    """Whether OpenMP's threads spin while they wait: GNU OpenMP's ``GOMP_SPINCOUNT`` above 0 (it overrides the
    policy), else ``OMP_WAIT_POLICY=ACTIVE``.

    >>> spinning({"OMP_WAIT_POLICY": "PASSIVE"}), spinning({"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "10000"})
    (False, True)
    """
    spin = environ.get("GOMP_SPINCOUNT", "").strip()
    if spin:
        try:
            return float(spin.rstrip("kKmMgGtT") or 0) > 0                 # libgomp accepts 10k, 1M, ... and "infinite"
        except ValueError:
            return spin.lower() == "infinite"
    return environ.get("OMP_WAIT_POLICY", "").strip().upper() == "ACTIVE"
