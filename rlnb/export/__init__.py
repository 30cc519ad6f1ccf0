"""Exports of a recipe to other trainers. ``to_trl(recipe)``: TRL's ``GRPOTrainer`` (needs ``trl``);
``trl_mapping(recipe)`` and ``mapping_table()``: the same mapping as plain data (no ``trl`` needed).
``to_verl(recipe)``: verl 0.9.1's PPO trainer as Hydra overrides (building it needs no ``verl``);
``verl_mapping(recipe)`` and ``verl_table()``: that mapping as plain data."""

from rlnb.export.exits import exits_table, verl_table
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
from rlnb.export.verl_export import VerlExport, to_verl
from rlnb.export.verl_map import VerlMapping, verl_mapping

__all__ = ["LOSS_TYPES", "SCALE_REWARDS", "Gap", "TRLExport", "TRLMapping", "VerlExport", "VerlMapping",
           "batch_geometry", "mapping_table", "overlong_reward", "text_reward", "to_trl", "to_verl", "trl_mapping",
           "verl_mapping", "verl_table", "exits_table"]
