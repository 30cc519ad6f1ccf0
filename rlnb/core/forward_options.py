"""``ForwardOptions``: how a forward runs (kernel backend, LM-head path, padding mode, row split, layer calls, which
rows keep a graph for the backward), never how it trains.

The six choices give the same numbers to rounding (tests compare them), so they are settings, not knobs.
They used to be three module-level dicts; a lab trains on a background thread, so a learner's
``with padding("padded"):`` in another cell changed the forward of the run playing in the background.

Now they live in one frozen dataclass, read through a context variable:

* a ``Trainer`` holds its own ``ForwardOptions`` (taken from the caller's context when it is built) and runs
  each step inside ``using(trainer.forward_options)``, so whatever thread steps it, the run only changes through
  ``Trainer.set_forward_options`` (recorded in ``trainer.forward_changes``);
* a bare stage or a direct ``completion_logprobs`` call reads the context of the thread that runs it, so
  ``with padding("padded"): updater.loss(batch)`` keeps working in a notebook cell;
* a new thread starts from the defaults (Python threads do not inherit a context variable), so a cell's
  ``with`` never reaches a thread that some other code started.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from dataclasses import dataclass

BACKENDS = ("auto", "torch", "chunked", "triton")
LM_HEAD_PATHS = ("fused", "reference")
PADDING_MODES = ("shared", "bucketed", "padded")
ROW_MODES = ("split", "whole")
LAYER_PATHS = ("lean", "modules")
BACKWARD_ROWS = ("needed", "all")
_CHOICES = {"backend": BACKENDS, "lm_head": LM_HEAD_PATHS, "padding": PADDING_MODES, "rows": ROW_MODES,
            "layers": LAYER_PATHS, "backward": BACKWARD_ROWS}


@dataclass(frozen=True)
class ForwardOptions:
    """How a forward runs; every combination gives the same numbers to rounding."""

    backend: str = "auto"     # rlnb.kernels: "auto" (Triton on CUDA, else chunked), "torch", "chunked", "triton"
    lm_head: str = "fused"    # rlnb.models.forward: "fused" (logits never whole) or "reference" (the model's own)
    padding: str = "shared"   # rlnb.models.buckets: "shared" (prompts once), "bucketed" or "padded" (the reference)
    rows: str = "split"       # rlnb.models.row_split: the update's rows as parallel parts on a CPU, or "whole" (one call)
    layers: str = "lean"      # rlnb.models.lean_forward: fp32 plain layers in fewer calls, or "modules" (the model's own)
    backward: str = "needed"  # rlnb.stages.live_rows: a graph only for rows whose gradient can be nonzero, or "all"

    def __post_init__(self):
        for name, choices in _CHOICES.items():
            check_choice(name, getattr(self, name), choices)

    def replace(self, **changes) -> ForwardOptions:
        """A copy with ``changes``; an unknown field raises naming it and the known ones."""
        unknown = sorted(set(changes) - set(_CHOICES))
        if unknown:
            raise TypeError(f"{unknown[0]}: not a forward option; known: {sorted(_CHOICES)}")
        return dataclasses.replace(self, **changes)


def check_choice(name: str, value, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name}: expected one of {choices}, got {value!r}")


# The one handle on the options in force: a context variable, so each thread (and each asyncio task) sees its own.
_CURRENT: contextvars.ContextVar[ForwardOptions] = contextvars.ContextVar("rlnb_forward_options",
                                                                          default=ForwardOptions())  # noqa: B039 (frozen)


def current() -> ForwardOptions:
    """The options in force in this thread now."""
    return _CURRENT.get()


@contextlib.contextmanager
def using(options: ForwardOptions | None = None, **changes):
    """Within the block (this thread only), forwards run with ``options`` (default: the current ones) and
    ``changes`` on top; the options before come back after it, whatever happens."""
    if options is not None and not isinstance(options, ForwardOptions):
        raise TypeError(f"options: expected ForwardOptions or None, got {type(options).__name__}")
    token = _CURRENT.set((options or current()).replace(**changes))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def set_current(**changes) -> ForwardOptions:
    """Change the options of this thread from now on (what ``kernels.set_backend`` does); returns them."""
    new = current().replace(**changes)
    _CURRENT.set(new)
    return new
