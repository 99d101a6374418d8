"""``kv-retrieval`` through a tokenizer (HF and served models): the same probe in words, at
any context length up to 128K tokens and beyond.

Each haystack line is a key, a separator, a value and a newline; keys and values follow
``--pair-format`` (``probes.pairs``: single-token words, six-digit numbers or UUID-like codes,
one or several tokens each). The prompt is assembled from token ids of separately encoded
pieces, and the probe checks that the tokenizer would read those very ids back (otherwise
positions would not be what was planned)::

    <bos> Remember the pairs.\n  apple: house\n  ... [needle: key: value\n] ...  lamp: river\n
    Question: what goes with apple? Answer:  house
                                            ^ answer_pos; anchor = the needle's first value token

Designs as for the native probe: shift-needle (the needle line moves through the haystack
token by token; a line it lands in is split) and pad-prefix (d filler tokens after BOS).

Size: ``n_pairs`` pairs (raised automatically until the needle sits beyond the raw window), or
with ``context_tokens`` as many pairs as fit in that many tokens (~16,000 word pairs at
131,072). The needle starts at ``depth`` of the haystack (0 first line, 1 last) and must end
at least ``min_gap`` tokens (the model's raw window plus one compression window) before the
question at every offset. Distractor candidates are the values of the nearest pairs whose
value differs. ``kv_gaps`` renders each content with g gap tokens between the needle's
separator and value (the value keeps its position), as the native probe does.

Token exactness without an O(context) round trip per item: the whole prompt of each content
is decoded and re-encoded once (its first offset); at every offset only the lines a splice
touches (the needle line and the haystack line it lands in, with the line before; the
padding and the lines around it) are decoded and re-encoded. Every other token of the
prompt is the same token in the same context as in the checked prompt, and the
pre-tokenizers of current LLM tokenizers (GPT-2, Llama 3, Qwen, DeepSeek byte-level BPE)
never merge across a newline into the next line's leading space, so a prompt whose touched
lines read back exactly reads back exactly as a whole (tests/test_niah.py checks the two agree).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass

import numpy as np

from phasescope.probes.base import Probe, ProbeError, ProbeItem
from phasescope.probes.kv_retrieval import DESIGNS, check_depth_and_gaps
from phasescope.probes.padding_completion import encoder
from phasescope.probes.pairs import FORMATS, PairFormat

LINE = 4  # tokens per haystack line in the words format: key, separator, value, newline
GAP_PIECES = (" -", " ~", " =", " .")  # one of them is the gap token of --kv-gaps
MAX_CONTEXT = 4_194_304  # refuse absurd --context-tokens before drawing millions of pairs


@dataclass(frozen=True)
class TextKVSpec:
    n_pairs: int = 24  # at least this many; raised until the needle sits beyond the raw window
    n_distractors: int = 3
    design: str = "shift-needle"
    filler: str = "\n"  # pad-prefix unit; must be one token
    depth: float = 0.5
    kv_gaps: tuple[int, ...] = (0,)
    pair_format: str = "words"
    context_tokens: int | None = None  # fill this many tokens with pairs (n_pairs is then ignored)

    def __post_init__(self) -> None:
        if self.design not in DESIGNS:
            raise ProbeError(f"design={self.design!r} is invalid; allowed: {' | '.join(DESIGNS)}")
        if self.n_pairs < self.n_distractors + 2:
            raise ProbeError(f"n_pairs={self.n_pairs} is too small for {self.n_distractors} distractors")
        if self.pair_format not in FORMATS:
            raise ProbeError(f"pair format {self.pair_format!r} is invalid; allowed: {' | '.join(FORMATS)}")
        if self.context_tokens is not None and not 64 <= self.context_tokens <= MAX_CONTEXT:
            raise ProbeError(
                f"context_tokens={self.context_tokens} is invalid; allowed: 64 .. {MAX_CONTEXT} (e.g. 131072)"
            )
        check_depth_and_gaps(self.depth, self.kv_gaps)


@dataclass
class Content:
    """One content sample: the haystack without the needle, as lines of token ids."""

    hay: list[int]  # every line but the needle's, concatenated
    line_starts: list[int]  # where each line of ``hay`` starts
    key: list[int]  # the needle's key ids
    value: list[int]  # the needle's value ids
    question: list[int]
    candidates: dict[str, list[int]]
    base: int  # where the needle line goes at offset 0 (variant g = 0), in ``hay``


class TextKVRetrievalProbe(Probe):
    name = "kv-retrieval"
    summary = "kv-retrieval in words, numbers or codes, for models with a tokenizer (up to 128K tokens)"
    has_keys = True

    def __init__(self, tokenizer, spec: TextKVSpec | None = None, bos_id: int | None = None, min_gap: int = 0):
        self.tokenizer, self.encode = tokenizer, encoder(tokenizer)
        self.params, self.bos, self.min_gap = spec or TextKVSpec(), bos_id, min_gap
        words = self._single_token_words() if self.params.pair_format == "words" else []
        self.format = PairFormat(self.params.pair_format, tokenizer, words)
        if self.params.context_tokens is None:
            self._check_pairs(self.params.n_pairs)
        self.sep, self.newline = self._one_token(":"), self._one_token("\n")
        self.pad = self._one_token(self.params.filler)
        self.gap_token = self._gap_token() if max(self.params.kv_gaps) else None
        self.intro = self.encode("Remember the pairs.\n")
        self.head = ([self.bos] if self.bos is not None else []) + self.intro
        self.ask = self.encode("Question: what goes with"), self.encode("? Answer:")
        self.n_pairs = self.params.n_pairs

    def spec(self) -> dict:
        pairs = self.n_pairs if self.params.context_tokens is None else None
        return {"probe": self.name + " (text)", **asdict(self.params), "min_gap": self.min_gap, "pairs": pairs}

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
            text = self.tokenizer.decode([token_id])
            if text.startswith(" ") and text[1:].isalpha() and text[1:].islower() and len(text) >= 4:
                if self.encode(text) == [token_id]:
                    words.append(token_id)
        return words

    def _pairs_needed(self, span: int) -> int:
        """Pairs for a haystack long enough that the needle ends >= min_gap tokens before the
        question's last token at every offset: (1 - depth) * (H - moves) + question >= min_gap - 1
        (lines of at least LINE tokens)."""
        question_len = len(self.ask[0]) + 1 + len(self.ask[1])
        moves = span if self.params.design == "shift-needle" else 0
        if self.params.depth >= 1 and self.min_gap > question_len + 1:
            raise ProbeError("depth=1 puts the needle right before the question, inside the raw window; lower --depth")
        room = max(0, self.min_gap - 1 - question_len) / max(1 - self.params.depth, 1e-9)
        first = 1 + max(self.params.kv_gaps)
        return max(self.params.n_pairs, math.ceil((room + moves + first) / LINE) + 1)

    def _check_pairs(self, n_pairs: int) -> None:
        words = len(self.format.words)
        if self.params.pair_format == "words" and words < n_pairs + self.params.n_distractors + 1:
            raise ProbeError(
                f"the tokenizer has only {words} single-token words; {n_pairs} distinct keys and "
                f"{self.params.n_distractors + 1} distinct values are needed (the haystack needs {n_pairs} pairs to "
                "put the needle beyond the model's raw window); use --pair-format numbers or codes, a tokenizer "
                "with more words, or a lower --depth"
            )

    def stream(self, offsets: list[int], n_samples: int, rng: np.random.Generator) -> Iterator[list[ProbeItem]]:
        span = max(offsets)
        if self.params.context_tokens is None:
            self.n_pairs = self._pairs_needed(span)
            self._check_pairs(self.n_pairs)
        for content_id in range(n_samples):
            content = self._content(span, rng)
            self._check_content(content, content_id, offsets[0])
            yield [
                self._place(content, content_id, d, gap, variant, span)
                for variant, gap in enumerate(self.params.kv_gaps)
                for d in offsets
            ]

    def _content(self, span: int, rng: np.random.Generator) -> Content:
        keys, values, needle = self._draw(span, rng)
        hay, line_starts = [], []
        for i in range(len(keys)):
            if i != needle:
                line_starts.append(len(hay))
                hay += keys[i] + [self.sep] + values[i] + [self.newline]
        moves = span if self.params.design == "shift-needle" else 0
        first = 1 + max(self.params.kv_gaps)
        base = first + int(self.params.depth * max(0, len(hay) - moves - first))
        question = self.ask[0] + keys[needle] + self.ask[1]
        candidates = {"right": values[needle]} | self._distractors(values, needle)
        return Content(hay, line_starts, keys[needle], values[needle], question, candidates, base)

    def _draw(self, span: int, rng: np.random.Generator):
        """Keys, values and the needle's index: ``n_pairs`` pairs, or as many as fill ``context_tokens``."""
        budget = self.params.context_tokens
        if budget is None:
            keys, values = self.format.draw(self.n_pairs, rng)
            return keys, values, int(rng.integers(0, self.n_pairs))
        most = min(budget // LINE, self.format.max_pairs())
        keys, values = self.format.draw(most, rng)
        fixed = len(self.head) + len(self.ask[0]) + len(self.ask[1]) + max(map(len, keys)) + max(map(len, values))
        fixed += span if self.params.design == "pad-prefix" else 0
        fixed += max(self.params.kv_gaps)
        lengths = np.cumsum([len(k) + len(v) + 2 for k, v in zip(keys, values, strict=True)])
        n = int(np.searchsorted(lengths, budget - fixed, side="right"))
        if n == len(keys) and most < budget // LINE:  # the format ran out of distinct keys before the context
            raise ProbeError(
                f"the {self.format.name} format has {self.format.max_pairs()} distinct keys with this tokenizer, "
                f"{int(lengths[-1])} tokens of pairs, short of --context-tokens {budget}; use --pair-format numbers "
                "or codes, or a shorter --context-tokens"
            )
        if n < self.params.n_distractors + 2:
            raise ProbeError(
                f"--context-tokens {budget} leaves room for {n} pairs; at least {self.params.n_distractors + 2} "
                "are needed: raise --context-tokens"
            )
        return keys[:n], values[:n], int(rng.integers(0, n))

    def _place(self, c: Content, content_id: int, d: int, gap: int, variant: int, span: int) -> ProbeItem:
        shift = self.params.design == "shift-needle"
        at = c.base + (d if shift else 0) - gap
        pad = [self.pad] * (0 if shift else d)
        line = c.key + [self.sep] + [self.gap_token] * gap + c.value + [self.newline]
        prompt = self.head + pad + c.hay[:at] + line + c.hay[at:] + c.question
        start = len(self.head) + len(pad)  # where the haystack starts in the prompt
        key_pos = start + at
        value_pos = key_pos + len(c.key) + 1 + gap
        self._check_splice(prompt, c, at, start, len(line), content_id, d)
        return ProbeItem(
            content_id=content_id,
            offset=d,
            input_ids=prompt,
            candidates=c.candidates,
            target="right",
            anchor_pos=value_pos,
            answer_pos=len(prompt),
            key_pos=key_pos,
            value_pos=value_pos,
            value_last=value_pos + len(c.value) - 1,
            variant=variant,
        )

    def _distractors(self, values: list[list[int]], needle: int) -> dict[str, list[int]]:
        """Values of the nearest pairs whose value differs from the answer and from each other."""
        chosen, seen = {}, {tuple(values[needle])}
        for i in sorted(range(len(values)), key=lambda i: (abs(i - needle), i)):
            if tuple(values[i]) not in seen and len(chosen) < self.params.n_distractors:
                seen.add(tuple(values[i]))
                chosen[f"pair{i - needle:+d}"] = values[i]
        return chosen

    def _reads_back(self, ids: list[int]) -> bool:
        return self.encode(self.tokenizer.decode(ids)) == ids

    def _check_content(self, c: Content, content_id: int, d: int) -> None:
        """Once per content: the whole prompt at its first offset, and every candidate after the question."""
        prompt = self._place(c, content_id, d, 0, 0, 0).input_ids
        body = prompt[1:] if self.bos is not None else prompt
        if not self._reads_back(body):
            raise ProbeError(
                f"content {content_id} offset {d}: the tokenizer re-tokenizes the haystack differently from the "
                "planned ids, so positions would shift; use another tokenizer, --pair-format or filler"
            )
        for name, answer in c.candidates.items():
            if not self._reads_back(self.ask[1] + answer):
                raise ProbeError(
                    f"content {content_id}: candidate {name!r} merges with the end of the question when tokenized; "
                    "use another --pair-format"
                )

    def _check_splice(self, prompt, c: Content, at: int, start: int, line_len: int, content_id, d) -> None:
        """At every offset: the lines the needle and the padding touch read back as planned."""
        k = bisect.bisect_right(c.line_starts, at) - 1  # the line the needle lands in (-1: before the first)
        first = start + c.line_starts[k - 1] if k >= 1 else len(self.head) - len(self.intro)
        end = c.line_starts[k + 1] if k + 1 < len(c.line_starts) else len(c.hay)
        regions = [(first, start + end + line_len)]
        if start > len(self.head):  # pad-prefix: the padding and the lines on both sides of it
            after = c.line_starts[1] if len(c.line_starts) > 1 else len(c.hay)
            regions.append((len(self.head) - len(self.intro), start + after + (line_len if at < after else 0)))
        for lo, hi in regions:
            if not self._reads_back(prompt[lo:hi]):
                raise ProbeError(
                    f"content {content_id} offset {d}: the tokenizer re-tokenizes the text around the needle or the "
                    "padding differently from the planned ids, so positions would shift; use another tokenizer, "
                    "--pair-format or filler"
                )
