"""rlnb: step through the sample -> reward -> advantage -> update loop of RL for LLM reasoning."""

__version__ = "0.1.0"

from rlnb import tasks
from rlnb.models import load, load_default
from rlnb.recipe import Recipe

__all__ = ["Recipe", "load", "load_default", "tasks", "__version__"]
