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

Placement: the needle starts at ``depth`` of the haystack (0 first line, 1 last) and must end
at least ``min_gap`` tokens (the model's raw window plus one compression window) before the
question at every offset; ``n_pairs`` is raised automatically until the haystack is long
enough. Keys are distinct words; values are drawn with replacement (a long haystack needs
more pairs than a small tokenizer has words), and distractor candidates are the values of the
nearest pairs whose value differs. ``kv_gaps`` renders each content with g gap tokens between
the needle's separator and value (the value keeps its position), as the native probe does.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from phasescope.probes.base import Probe, ProbeError, ProbeItem
from phasescope.probes.kv_retrieval import DESIGNS, check_depth_and_gaps
from phasescope.probes.padding_completion import encoder

LINE = 4  # tokens per haystack line: key, separator, value, newline
GAP_PIECES = (" -", " ~", " =", " .")  # one of them is the gap token of --kv-gaps


@dataclass(frozen=True)
class TextKVSpec:
    n_pairs: int = 24  # at least this many; raised until the needle sits beyond the raw window
    n_distractors: int = 3
    design: str = "shift-needle"
    filler: str = "\n"  # pad-prefix unit; must be one token
    depth: float = 0.5
    kv_gaps: tuple[int, ...] = (0,)

    def __post_init__(self) -> None:
        if self.design not in DESIGNS:
            raise ProbeError(f"design={self.design!r} is invalid; allowed: {' | '.join(DESIGNS)}")
        if self.n_pairs < self.n_distractors + 2:
            raise ProbeError(f"n_pairs={self.n_pairs} is too small for {self.n_distractors} distractors")
        check_depth_and_gaps(self.depth, self.kv_gaps)


class TextKVRetrievalProbe(Probe):
    name = "kv-retrieval"
    summary = "kv-retrieval in words, for models with a tokenizer"
    has_keys = True

    def __init__(self, tokenizer, spec: TextKVSpec | None = None, bos_id: int | None = None, min_gap: int = 0):
        self.tokenizer, self.encode = tokenizer, encoder(tokenizer)
        self.params, self.bos, self.min_gap = spec or TextKVSpec(), bos_id, min_gap
        self.words = self._single_token_words()
        self._check_words(self.params.n_pairs)
        self.sep, self.newline = self._one_token(":"), self._one_token("\n")
        self.pad = self._one_token(self.params.filler)
        self.gap_token = self._gap_token() if max(self.params.kv_gaps) else None
        self.intro = self.encode("Remember the pairs.\n")
        self.head = ([self.bos] if self.bos is not None else []) + self.intro
        self.n_pairs = self.params.n_pairs

    def spec(self) -> dict:
        return {"probe": self.name + " (text)", **asdict(self.params), "min_gap": self.min_gap, "pairs": self.n_pairs}

    def _one_token(self, text: str) -> int:
        ids = self.encode(text)
        if len(ids) != 1:
            raise ProbeError(f"{text!r} is {len(ids)} tokens with this tokenizer; the probe needs it to be one")
        return ids[0]

    def _gap_token(self) -> int:
        for piece in GAP_PIECES:
            if len(self.encode(piece)) == 1:
                return self.encode(piece)[0]
        raise ProbeError(f"none of {GAP_PIECES} is one token with this tokenizer; --kv-gaps needs one")

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

    def _pairs_needed(self, span: int, question_len: int) -> int:
        """Pairs for a haystack long enough that the needle ends >= min_gap tokens before the
        question's last token at every offset: (1 - depth) * (H - moves) + question >= min_gap - 1."""
        moves = span if self.params.design == "shift-needle" else 0
        if self.params.depth >= 1 and self.min_gap > question_len + 1:
            raise ProbeError("depth=1 puts the needle right before the question, inside the raw window; lower --depth")
        room = max(0, self.min_gap - 1 - question_len) / max(1 - self.params.depth, 1e-9)
        first = 1 + max(self.params.kv_gaps)
        return max(self.params.n_pairs, math.ceil((room + moves + first) / LINE) + 1)

    def _check_words(self, n_pairs: int) -> None:
        if len(self.words) < n_pairs + self.params.n_distractors + 1:
            raise ProbeError(
                f"the tokenizer has only {len(self.words)} single-token words; {n_pairs} distinct keys and "
                f"{self.params.n_distractors + 1} distinct values are needed (the haystack needs {n_pairs} pairs to "
                "put the needle beyond the model's raw window); use a tokenizer with more words or a lower --depth"
            )

    def items(self, offsets: list[int], n_samples: int, rng: np.random.Generator) -> list[ProbeItem]:
        span = max(offsets)
        question_ends = self.encode("Question: what goes with"), self.encode("? Answer:")
        self.n_pairs = self._pairs_needed(span, len(question_ends[0]) + 1 + len(question_ends[1]))
        self._check_words(self.n_pairs)
        out = []
        for content_id in range(n_samples):
            out += self._content_items(content_id, offsets, span, question_ends, rng)
        return out

    def _content_items(self, content_id, offsets, span, question_ends, rng) -> list[ProbeItem]:
        n = self.n_pairs
        keys = [int(x) for x in rng.choice(self.words, size=n, replace=False)]
        pool = [w for w in self.words if w not in set(keys)] or self.words
        values = [int(x) for x in rng.choice(pool, size=n)]
        needle = int(rng.integers(0, n))
        hay = [tok for i in range(n) if i != needle for tok in (keys[i], self.sep, values[i], self.newline)]
        moves = span if self.params.design == "shift-needle" else 0
        first = 1 + max(self.params.kv_gaps)
        base = first + int(self.params.depth * max(0, len(hay) - moves - first))
        question = question_ends[0] + [keys[needle]] + question_ends[1]
        candidates = {"right": [values[needle]]} | self._distractors(values, needle)
        items = []
        for variant, gap in enumerate(self.params.kv_gaps):
            line = [keys[needle], self.sep] + [self.gap_token] * gap + [values[needle], self.newline]
            for d in offsets:
                at = base + (d if self.params.design == "shift-needle" else 0) - gap
                pad = [self.pad] * (d if self.params.design == "pad-prefix" else 0)
                prompt = self.head + pad + hay[:at] + line + hay[at:] + question
                key_pos = len(self.head) + len(pad) + at
                self._check_round_trip(prompt, content_id, d)
                value_pos = key_pos + 2 + gap
                items.append(
                    ProbeItem(
                        content_id=content_id,
                        offset=d,
                        input_ids=prompt,
                        candidates=candidates,
                        target="right",
                        anchor_pos=value_pos,
                        answer_pos=len(prompt),
                        key_pos=key_pos,
                        value_pos=value_pos,
                        value_last=value_pos,
                        variant=variant,
                    )
                )
        return items

    def _distractors(self, values: list[int], needle: int) -> dict[str, list[int]]:
        """Values of the nearest pairs whose value differs from the answer and from each other."""
        chosen, seen = {}, {values[needle]}
        for i in sorted(range(len(values)), key=lambda i: (abs(i - needle), i)):
            if values[i] not in seen and len(chosen) < self.params.n_distractors:
                seen.add(values[i])
                chosen[f"pair{i - needle:+d}"] = [values[i]]
        return chosen

    def _check_round_trip(self, prompt: list[int], content_id: int, d: int) -> None:
        body = prompt[1:] if self.bos is not None else prompt
        if self.encode(self._decode(body)) != body:
            raise ProbeError(
                f"content {content_id} offset {d}: the tokenizer re-tokenizes the haystack differently from the "
                "planned ids, so positions would shift; use another tokenizer or filler"
            )
