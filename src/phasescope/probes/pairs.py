"""Key and value formats of the text ``kv-retrieval`` haystack (``--pair-format``).

The study's exact pair format is not published; these three cover the usual needle-in-a-
haystack styles and work with any tokenizer, because keys and values are encoded as the
tokenizer wants (one or several tokens) and every length is taken from the ids, never assumed:

* ``pieces``: key and value are each one vocabulary piece: a space and 3+ lowercase letters that
  the tokenizer encodes as that single token (`` apple: house``). On an English vocabulary these
  are mostly words; on a multilingual one (DeepSeek-V4's) many are fragments (`` jedn``,
  `` được``), hence the name. Keys are distinct, so the haystack holds at most as many pairs as
  the tokenizer has such pieces (tens of thousands in LLM vocabularies). ``words`` is the old
  name of the same format (``LEGACY``), still read: runs made with it resume.
* ``numbers``: six-digit numbers (`` 482913: 771204``); 900,000 distinct keys, 1-6 tokens each
  depending on how the tokenizer splits digits.
* ``codes``: UUID-like codes of two 4-character groups (`` k7f2-9xq3: m2d8-a0pz``); the most
  tokens per pair, the least chance that the model knows a key from pre-training.

A format draws ``n`` pairs: distinct keys (only the queried key must be unique for retrieval
to be well posed; all are, so any pair could be the needle) and values drawn with replacement.
"""

from __future__ import annotations

import string

import numpy as np

from phasescope.probes.base import ProbeError
from phasescope.rundir import RENAMED_VALUES

FORMATS = ("pieces", "numbers", "codes")
LEGACY = RENAMED_VALUES["pair_format"]  # an earlier name -> the format's name now (the same draw)
CODE_ALPHABET = np.array(list(string.ascii_lowercase + string.digits))


def encode_many(tokenizer, texts: list[str]) -> list[list[int]]:
    """Token ids of each text (no special tokens), in one batched call."""
    if not texts:
        return []
    if hasattr(tokenizer, "encode_batch") and not hasattr(tokenizer, "convert_tokens_to_ids"):
        return [e.ids for e in tokenizer.encode_batch(texts, add_special_tokens=False)]
    return [list(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]


def encode_many_fast(tokenizer, texts: list[str]) -> list[list[int]]:
    """``encode_many`` through the Rust tokenizer behind a transformers fast tokenizer when there
    is one (twice as fast on a vocabulary's worth of texts; same ids)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    return encode_many(backend if backend is not None else tokenizer, texts)


class PairFormat:
    """Draws (key ids, value ids) pairs; ``pieces`` needs the tokenizer's single-token pieces (``words``)."""

    def __init__(self, name: str, tokenizer, words: list[int] | None = None):
        name = LEGACY.get(name, name)
        if name not in FORMATS:
            raise ProbeError(f"pair format {name!r} is invalid; allowed: {' | '.join(FORMATS)}")
        self.name, self.tokenizer, self.words = name, tokenizer, words or []

    def max_pairs(self) -> int:
        return {"pieces": len(self.words) - 1, "numbers": 900_000, "codes": 36**8}[self.name]

    def draw(self, n: int, rng: np.random.Generator) -> tuple[list[list[int]], list[list[int]]]:
        """``n`` distinct keys and ``n`` values (with replacement), as token ids."""
        if n > self.max_pairs():
            raise ProbeError(
                f"{n} pairs need {n} distinct keys but the {self.name} format has {self.max_pairs()} with this "
                "tokenizer; use --pair-format numbers or codes, or a shorter --context-tokens"
            )
        if self.name == "pieces":
            keys = [int(x) for x in rng.choice(self.words, size=n, replace=False)]
            taken = set(keys)
            pool = [w for w in self.words if w not in taken] or self.words
            values = [int(x) for x in rng.choice(pool, size=n)]
            return [[k] for k in keys], [[v] for v in values]
        key_texts = self._texts(n, rng, distinct=True)
        value_texts = self._texts(n, rng, distinct=False)
        return encode_many(self.tokenizer, key_texts), encode_many(self.tokenizer, value_texts)

    def _texts(self, n: int, rng: np.random.Generator, distinct: bool) -> list[str]:
        if self.name == "numbers":
            numbers = rng.choice(900_000, size=n, replace=False) if distinct else rng.integers(0, 900_000, size=n)
            return [f" {100_000 + int(x)}" for x in numbers]
        texts: list[str] = []
        seen: set[str] = set()
        while len(texts) < n:  # codes: 36^8 possibilities, so a repeat is rare and simply redrawn
            for chars in rng.choice(CODE_ALPHABET, size=(n - len(texts), 8)):
                text = " " + "".join(chars[:4]) + "-" + "".join(chars[4:])
                if not distinct or text not in seen:
                    seen.add(text)
                    texts.append(text)
        return texts
