"""``kv-retrieval`` through a tokenizer (HF models): the same probe in words.

Keys and values are words the tokenizer encodes as exactly one token (with their leading
space), so every pair has a known token length. The prompt is assembled from token ids of
separately encoded pieces; the probe then checks that encoding the decoded text gives back
exactly those ids (otherwise the tokenizer would re-tokenize the haystack differently and
positions would not be what was planned) and raises ``ProbeError`` if not::

    <bos> Remember the pairs.\\n  apple: house\\n  ... [needle: key: value\\n] ...  lamp: river\\n
    Question: what goes with apple? Answer:  house
                                            ^ answer_pos; anchor = the needle's value token

Designs as for the native probe: shift-needle (the needle line moves through the haystack
token by token; a line it lands in is split) and pad-prefix (d filler tokens after BOS).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from phasescope.probes.base import Probe, ProbeError, ProbeItem
from phasescope.probes.kv_retrieval import DESIGNS
from phasescope.probes.padding_completion import encoder


@dataclass(frozen=True)
class TextKVSpec:
    n_pairs: int = 24
    n_distractors: int = 3
    design: str = "shift-needle"
    filler: str = "\n"  # pad-prefix unit; must be one token

    def __post_init__(self) -> None:
        if self.design not in DESIGNS:
            raise ProbeError(f"design={self.design!r} is invalid; allowed: {' | '.join(DESIGNS)}")
        if self.n_pairs < self.n_distractors + 2:
            raise ProbeError(f"n_pairs={self.n_pairs} is too small for {self.n_distractors} distractors")


class TextKVRetrievalProbe(Probe):
    name = "kv-retrieval"
    summary = "kv-retrieval in words, for models with a tokenizer"
    has_keys = True

    def __init__(self, tokenizer, spec: TextKVSpec | None = None, bos_id: int | None = None):
        self.tokenizer, self.encode = tokenizer, encoder(tokenizer)
        self.params, self.bos = spec or TextKVSpec(), bos_id
        self.words = self._single_token_words()
        if len(self.words) < 2 * self.params.n_pairs:
            raise ProbeError(
                f"the tokenizer has only {len(self.words)} single-token words; {2 * self.params.n_pairs} are needed"
            )
        self.sep, self.newline = self._one_token(":"), self._one_token("\n")
        self.pad = self._one_token(self.params.filler)

    def spec(self) -> dict:
        return {"probe": self.name + " (text)", **asdict(self.params)}

    def _one_token(self, text: str) -> int:
        ids = self.encode(text)
        if len(ids) != 1:
            raise ProbeError(f"{text!r} is {len(ids)} tokens with this tokenizer; the probe needs it to be one")
        return ids[0]

    def _single_token_words(self) -> list[int]:
        """Ids of ' word' pieces (lowercase letters, 3+) that encode back to themselves."""
        vocab = self.tokenizer.get_vocab()
        words = []
        for token_id in sorted(vocab.values()):
            text = self._decode([token_id])
            if text.startswith(" ") and text[1:].isalpha() and text[1:].islower() and len(text) >= 4:
                if self.encode(text) == [token_id]:
                    words.append(token_id)
        return words

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)

    def items(self, offsets: list[int], n_samples: int, rng: np.random.Generator) -> list[ProbeItem]:
        span = max(offsets)
        intro = self.encode("Remember the pairs.\n")
        head = ([self.bos] if self.bos is not None else []) + intro
        out = []
        for content_id in range(n_samples):
            chosen = rng.choice(self.words, size=2 * self.params.n_pairs, replace=False)
            keys, values = [int(x) for x in chosen[::2]], [int(x) for x in chosen[1::2]]
            lines = [[k, self.sep, v, self.newline] for k, v in zip(keys, values, strict=True)]
            needle = int(rng.integers(0, self.params.n_pairs))
            hay = [tok for i, line in enumerate(lines) if i != needle for tok in line]
            base = (len(hay) - span) // 2
            if base < 0:
                raise ProbeError(f"offsets up to {span} do not fit in a haystack of {len(hay)} tokens; raise n_pairs")
            question = self.encode("Question: what goes with") + [keys[needle]] + self.encode("? Answer:")
            for d in offsets:
                at = base + (d if self.params.design == "shift-needle" else 0)
                pad = [self.pad] * (d if self.params.design == "pad-prefix" else 0)
                prompt = head + pad + hay[:at] + lines[needle] + hay[at:] + question
                key_pos = len(head) + len(pad) + at
                self._check_round_trip(prompt, content_id, d)
                others = sorted((i for i in range(self.params.n_pairs) if i != needle), key=lambda i: abs(i - needle))
                candidates = {"right": [values[needle]]}
                candidates |= {f"pair{i - needle:+d}": [values[i]] for i in others[: self.params.n_distractors]}
                out.append(
                    ProbeItem(
                        content_id=content_id,
                        offset=d,
                        input_ids=prompt,
                        candidates=candidates,
                        target="right",
                        anchor_pos=key_pos + 2,
                        answer_pos=len(prompt),
                        key_pos=key_pos,
                        value_pos=key_pos + 2,
                        value_last=key_pos + 2,
                    )
                )
        return out

    def _check_round_trip(self, prompt: list[int], content_id: int, d: int) -> None:
        body = prompt[1:] if self.bos is not None else prompt
        if self.encode(self._decode(body)) != body:
            raise ProbeError(
                f"content {content_id} offset {d}: the tokenizer re-tokenizes the haystack differently from the "
                "planned ids, so positions would shift; use another tokenizer or filler"
            )
