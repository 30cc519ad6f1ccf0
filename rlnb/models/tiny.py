"""The embedded default: a tiny real ``transformers`` causal LM with its own character tokenizer.

It lives in ``rlnb/models/default/`` (``config.json``, ``tokenizer.json``, ``model.safetensors``) and
loads with ``from_pretrained`` like any Hugging Face model, so everything rlnb does with it works the
same on a real model. ``scripts/build_default.py`` rebuilds it deterministically.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, PreTrainedTokenizerFast

DEFAULT_DIR = Path(__file__).parent / "default"
SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]
CHARS = ["\n"] + [chr(i) for i in range(32, 127)]  # newline and printable ASCII


def build_tokenizer() -> PreTrainedTokenizerFast:
    """A character-level ``WordLevel`` tokenizer: one id per printable ASCII character.

    Left padding (prompts of different lengths end at the same column, ready for generation); a BOS
    token is prepended to every encoded text; decoding joins characters back without spaces.
    """
    vocab = {tok: i for i, tok in enumerate(SPECIALS + CHARS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("(?m)."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", vocab["<bos>"])]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>",
        unk_token="<unk>", padding_side="left", model_max_length=256,
    )


def build_config(vocab_size: int, **overrides) -> LlamaConfig:
    """4 layers, hidden 128, 4 heads, MLP 512, tied embeddings: about 1.05M parameters."""
    cfg = dict(
        vocab_size=vocab_size, hidden_size=128, intermediate_size=512, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256,
        tie_word_embeddings=True, bos_token_id=1, eos_token_id=2, pad_token_id=0,
    )
    cfg.update(overrides)
    return LlamaConfig(**cfg)


@contextlib.contextmanager
def quiet_progress():
    """Hide transformers' per-file progress bars (noise for a 4 MB model, in notebooks and CI logs)."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


def load(name_or_path: str | Path = DEFAULT_DIR, *, dtype: torch.dtype = torch.float32, device: str = "cpu"):
    """``(model, tokenizer)`` for any Hugging Face causal LM name or local folder (safetensors only)."""
    try:
        with quiet_progress():
            model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=dtype, use_safetensors=True)
    except Exception as e:  # not found, offline, no safetensors, a corrupt file: name it, in one line
        if not isinstance(e, OSError) and type(e).__name__ != "SafetensorError":
            raise
        raise OSError(f"model: cannot load {str(name_or_path)!r}: {_first_line(e)}") from e
    try:
        with quiet_progress():
            tokenizer = AutoTokenizer.from_pretrained(name_or_path)
    except (OSError, ValueError) as e:  # a model folder without tokenizer files
        raise OSError(f"tokenizer: cannot load a tokenizer from {str(name_or_path)!r} (expected tokenizer.json or "
                      f"tokenizer_config.json with its vocabulary there): {_first_line(e)}") from e
    if tokenizer.pad_token is None:  # many chat models ship without one; EOS is the usual stand-in
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return model.to(device).eval(), tokenizer


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else type(e).__name__


def load_default(*, dtype: torch.dtype = torch.float32, device: str = "cpu"):
    """``(model, tokenizer)`` of the embedded default model shipped inside the package."""
    if not (DEFAULT_DIR / "model.safetensors").exists():
        raise FileNotFoundError(
            f"the embedded default model is missing from {DEFAULT_DIR}; rebuild it with "
            "`python scripts/build_default.py`"
        )
    return load(DEFAULT_DIR, dtype=dtype, device=device)
