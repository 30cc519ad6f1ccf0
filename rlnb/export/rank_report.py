"""What each process of a multi-process TRL run did, written by that process (``launch_trl.py --rank-report``).

A launch with ``accelerate launch --num_processes 2`` (or torchrun) trains one model replica per process;
DDP averages their gradients, so after every optimizer step the replicas hold the same weights. The report
lets a test (or a user) check from outside that every rank trained: its step count, its logged losses and a
checksum of its weights, which must move from the start and agree across ranks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch


def weight_checksum(model) -> float:
    """Sum of |w| over every parameter, in float64: equal on replicas that hold the same weights."""
    with torch.no_grad():
        return float(sum(p.detach().double().abs().sum() for p in model.parameters()))


def write_rank_report(trainer, folder) -> Path:
    """Write ``folder/rank<R>.json`` for this process; returns its path."""
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    model = trainer.accelerator.unwrap_model(trainer.model) if hasattr(trainer, "accelerator") else trainer.model
    report = {"rank": rank, "world_size": world, "global_step": int(trainer.state.global_step),
              "losses": [h["loss"] for h in trainer.state.log_history if "loss" in h],
              "checksum": weight_checksum(model)}
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"rank{rank}.json"
    path.write_text(json.dumps(report))
    return path
