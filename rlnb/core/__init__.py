"""The leaf of the package: input checks (``checks``), the knob declarations' machinery (``knobs``), the
``Batch``'s field checks (``batch_checks``), a step's runtime helpers (``runtime``) and numbers as a learner
reads them (``display``). Nothing here imports anything else from rlnb, so every other module may import it."""

__version__ = "0.1.0"
