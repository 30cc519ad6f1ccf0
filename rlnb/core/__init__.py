"""The leaf of the package: input checks (``checks``), the knob declarations' machinery (``knobs``), the
``Batch``'s field checks (``batch_checks``) and a step's runtime helpers (``runtime``). Nothing here imports
anything else from rlnb, so every other module may import it."""

__version__ = "0.1.0"
