"""Exports of a recipe to other trainers. ``to_trl(recipe)``: TRL's ``GRPOTrainer`` (needs ``trl``);
``trl_mapping(recipe)`` and ``mapping_table()``: the same mapping as plain data (no ``trl`` needed)."""

from rlnb.export.trl_export import TRLExport, overlong_reward, text_reward, to_trl
from rlnb.export.trl_map import (
    LOSS_TYPES,
    SCALE_REWARDS,
    Gap,
    TRLMapping,
    batch_geometry,
    mapping_table,
    trl_mapping,
)

__all__ = ["LOSS_TYPES", "SCALE_REWARDS", "Gap", "TRLExport", "TRLMapping", "batch_geometry", "mapping_table",
           "overlong_reward", "text_reward", "to_trl", "trl_mapping"]
