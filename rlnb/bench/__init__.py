"""Benchmarks that print figures side by side: ``python -m rlnb.bench loss --help``, ``... step --help``.

``main(argv)`` is the entry point for a CLI (``rlnb bench loss ...`` -> ``main(["loss", ...])``).
"""

from __future__ import annotations

import sys

COMMANDS = ("loss", "step")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        print(f"usage: python -m rlnb.bench {{{','.join(COMMANDS)}}} [options]   (known: {COMMANDS})")
        return 2
    if argv[0] == "step":
        from rlnb.bench.step import main as step_main
        return step_main(argv[1:])
    from rlnb.bench.loss import main as loss_main
    return loss_main(argv[1:])
