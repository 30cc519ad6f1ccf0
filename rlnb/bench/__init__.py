"""Benchmarks that print figures side by side: ``python -m rlnb.bench loss --help``, ``... step``, ``... padding``,
``... trl``, ``... waits``, ``... rows``. Timings live here; training-level studies (arms x seeds, a claim) are ``rlnb.studies``.

- ``loss``: the token-loss kernels and the LM-head paths (``loss.py``; GPU variants in ``gpu.py``, ``variants.py``);
- ``step``: a training step's phases on a Qwen2-shaped model (``step.py``);
- ``padding``: where a step's padding goes, each way of generating and of the training forward (``padding.py``;
  ``scripts/bench_padding.py``);
- ``trl``: rlnb's GRPO step against TRL's ``GRPOTrainer``, interleaved (``vs_trl.py``; ``scripts/bench_vs_trl.py``);
- ``waits``: a step under passive and spinning OpenMP waits, quiet and beside busy processes (``waits.py``);
- ``rows``: a step with its rows as parallel parts and as one call (``rows.py``).

``main(argv)`` is the entry point for a CLI (``rlnb bench loss ...`` -> ``main(["loss", ...])``).
"""

from __future__ import annotations

import importlib
import sys

COMMANDS = {"loss": "loss", "step": "step", "padding": "padding", "trl": "vs_trl", "waits": "waits", "rows": "rows"}  # command -> module


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        print(f"usage: python -m rlnb.bench {{{','.join(COMMANDS)}}} [options]   (known: {tuple(COMMANDS)})")
        return 2
    module = importlib.import_module(f"rlnb.bench.{COMMANDS[argv[0]]}")
    return module.main(argv[1:]) or 0
