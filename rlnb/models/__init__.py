"""Models: the embedded default and any Hugging Face causal LM.

The names load ``rlnb.models.tiny`` (and ``transformers``) on first use, so a process that needs only a submodule
(the decode worker, ``rlnb.models.decode_process``) starts without them."""

__all__ = ["DEFAULT_DIR", "build_config", "build_tokenizer", "load", "load_default"]


def __getattr__(name: str):
    if name in __all__:
        from rlnb.models import tiny
        return getattr(tiny, name)
    raise AttributeError(f"module 'rlnb.models' has no attribute {name!r}")
