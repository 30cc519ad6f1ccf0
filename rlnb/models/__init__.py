"""Models: the embedded default and any Hugging Face causal LM."""

from rlnb.models.tiny import DEFAULT_DIR, build_config, build_tokenizer, load, load_default

__all__ = ["DEFAULT_DIR", "build_config", "build_tokenizer", "load", "load_default"]
