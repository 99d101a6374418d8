"""``kv-retrieval`` through a tokenizer (HF and served models): the same probe in text, at
any context length up to 128K tokens and beyond, on any byte-level BPE.

Each haystack line is a key, a separator, a value and a newline; keys and values follow
``--pair-format`` (``probes.pairs``: single-token pieces, six-digit numbers or UUID-like codes,
one or several tokens each; ``auto``: pieces when the tokenizer has enough, else numbers). The
prompt is assembled from the ids of separately encoded lines, and nothing is ever split: the
needle line goes *between* two haystack lines, and fillers whose token counts are measured in
place (``probes.padding``, strict: the lines on both sides read back unchanged) make up the
distance to the exact token the offset asks for::

    <bos> Remember the pairs.\\n [lead] apple: house\\n ... [f] key: value\\n [F-f] lamp: river\\n
    Question: what goes with key? Answer:  value
                                   ^ answer_pos; anchor = the needle's first value token

* shift-needle (content and total length fixed, question fixed): the needle's key sits at
  ``base + d``: it goes after the last line that starts at or before that token, with f filler
  tokens before it and F - f after it (F + 1 = the longest line), so the length never changes.
* pad-prefix: the needle at ``base``; d filler tokens are added to the lead, so everything
  after BOS and the intro moves by d.

**Every content at the same phase** (``same_phase``, the default): each content's text has its
own length, so left alone each content's answer would start at its own phase (offset 0 put 6 of
24 contents at phase 1, 11 at 2 and 7 at 3 on DeepSeek-V4's tokenizer). The needle's base
position is moved by fewer than ``step`` tokens so that at offset 0 every content's anchor sits
at phase 0 (``(anchor - align) mod step = 0``, so offset d is phase d mod step for every
content); records carry the move as ``padding.same_phase_shift``. ``--mixed-phase`` leaves each
content where its text puts it (the statistics take either).

Each content draws a lead of 0..F filler tokens before its first line. With lines of the same
length (four tokens for pieces, eight for DeepSeek numbers) the filler next to the needle would
otherwise be fixed by the phase (f = (base + d) mod line length); with a random lead, f is
independent of the phase across contents. Records carry the filler before the needle (or the
pad-prefix padding) as text and tokens.

Why not splice anywhere: DeepSeek-V4's pre-tokenizer glues punctuation to following newlines
(``.\\n``) and merges ``\\n\\n``, so a needle that splits a line changes its neighbours' ids.
Token exactness is still checked, not assumed: the whole prompt of each content is decoded and
re-encoded once (its first offset), and at every offset the lines a splice touches (the needle,
its fillers and the lines on both sides; the lead) are; every other token is the same token in
the same context as in the checked prompt (tests/test_niah.py checks the two checks agree).

Size: ``n_pairs`` pairs (raised automatically until the needle sits beyond the raw window), or
with ``context_tokens`` as many pairs as fit in that many tokens (~16,000 numbers pairs at
131,072 on DeepSeek-V4's tokenizer: eight tokens per pair). The needle starts at ``depth`` of
the haystack and must end at least ``min_gap`` tokens (the model's raw window plus one
compression window) before the question at every offset. Distractor candidates are the values
of the nearest pairs whose value differs. ``kv_gaps`` renders each content with g filler tokens
between the needle's separator and value (the value keeps its position), as the native probe.
"""

from __future__ import annotations

import bisect
import copy
import hashlib
import json
import math
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from phasescope.designs import end_shifts, most_end_filler, needle_moves, prefix_padded
from phasescope.probes.base import Probe, ProbeError, ProbeItem, by_length
from phasescope.probes.kv_options import TextKVSpec
from phasescope.probes.padding import Padding, encode_sides, fit, measure, shapes
from phasescope.probes.padding_completion import decoder, encoder
from phasescope.probes.pairs import PairFormat, encode_many_fast

LINE = 4  # fewest tokens a haystack line can take: key, separator, value, newline
FILLERS = (" .", " -", " ~", " =", "\n", " ")  # filler units, tried in order when --filler is not given
GAP_FILLERS = (" -", " ~", " =", " .")  # --kv-gaps: between the needle's separator and value


@dataclass
class Content:
    """One content sample: the haystack without the needle, as lines of token ids."""

    lines: list[list[int]]  # every haystack line but the needle's
    ends: list[int]  # where each line ends in the concatenated lines (its start: the previous end, or 0)
    key: list[int]  # the needle's key ids
    value: list[int]  # the needle's value ids
    question: list[int]
    candidates: dict[str, list[int]]
    base: int  # the needle key's position at offset 0 (variant 0), counted from the haystack's first token
    lead: int  # filler tokens before the first line
    slack: int  # F: filler tokens around the needle in shift-needle (f before it, F - f after)
    shift: int = 0  # tokens the base was moved by to put the anchor at phase 0 at offset 0 (same_phase)

    def boundary(self, k: int) -> int:
        """Where line k starts in the concatenated lines (k = len(lines): their end)."""
        return 0 if k == 0 else self.ends[k - 1]


class Fillers:
    """Filler ids of an exact token count between two texts, measured in place (strict: both
    neighbours keep their ids). The text that worked for a count is tried first next time."""

    def __init__(self, encode, decode, units: tuple[str, ...]):
        self.encode, self.decode, self.units = encode, decode, units
        self.known: dict[int, Padding] = {}

    def between(self, left: str, right: str, tokens: int, where: str) -> Padding:
        if tokens == 0:
            return Padding("", 0, 0, ())
        sides = encode_sides(self.encode, left, right)
        if tokens in self.known:
            known = self.known[tokens]
            placed = fit(self.encode, self.decode, left, right, known.text, False, sides=sides)
            if placed is not None and placed[2] - placed[1] == tokens:
                ids, start, end = placed
                return Padding(known.text, known.units, tokens, tuple(ids[start:end]))
        want = len(sides[0]) + len(sides[1]) + tokens
        for unit in self.units:
            for shape in shapes(unit, 2 * tokens + 8):
                found = measure(self.encode, self.decode, left, right, shape, False, sides=sides)
                if want in found:
                    self.known[tokens] = found[want]
                    return found[want]
        raise ProbeError(
            f"{where}: no filler of {', '.join(map(repr, self.units))} gives exactly {tokens} tokens between "
            f"{left[-30:]!r} and {right[:30]!r} without changing them with this tokenizer; pass --filler with a "
            "unit that does"
        )


def _backend(tokenizer):
    """The tokenizers.Tokenizer behind a transformers fast tokenizer (or itself), else None."""
    if hasattr(tokenizer, "decode_batch"):
        return tokenizer
    return getattr(tokenizer, "backend_tokenizer", None)


def words_cache(tokenizer) -> Path | None:
    """Where a tokenizer's single-token words are kept: ``~/.cache/phasescope/tokenizers`` (or
    ``$PHASESCOPE_CACHE``), keyed by its tokenizer.json's path, size and time (None: a tokenizer
    not read from one file, whose words are computed every time)."""
    path = getattr(tokenizer, "name_or_path", None)
    if not path or not Path(path).is_file():
        return None
    stat = Path(path).stat()
    key = hashlib.sha256(f"{Path(path).resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    cache = Path(os.environ.get("PHASESCOPE_CACHE", Path.home() / ".cache" / "phasescope")) / "tokenizers"
    return cache / f"words-{key}.json"


def _word(text: str) -> bool:
    return text.isalpha() and text.islower()


class TextKVRetrievalProbe(Probe):
    name = "kv-retrieval"
    summary = "kv-retrieval in vocabulary pieces, numbers or codes, for models with a tokenizer (up to 128K tokens)"
    has_keys = True

    def __init__(
        self,
        tokenizer,
        spec: TextKVSpec | None = None,
        bos_id: int | None = None,
        min_gap: int = 0,
        step: int = 1,
        align: int = 0,
    ):
        self.tokenizer, self.encode, self.decode = tokenizer, encoder(tokenizer), decoder(tokenizer)
        self.params, self.bos, self.min_gap = spec or TextKVSpec(), bos_id, min_gap
        self.step, self.align = step, align
        self.lead_in = 0  # tokens a wrapper puts before the prompt (--chat-template): they count in the phase
        self.words = self._single_token_words() if self.params.pair_format in ("pieces", "auto") else []
        self.sep, self.newline = self._one_token(":"), self._one_token("\n")
        units = (self.params.filler,) if self.params.filler else FILLERS
        self.fillers = Fillers(self.encode, self.decode, units)
        self.gaps = Fillers(self.encode, self.decode, GAP_FILLERS)
        self.intro = self.encode("Remember the pairs.\n")
        self.head = ([self.bos] if self.bos is not None else []) + self.intro
        self.ask = self.encode("Question: what goes with"), self.encode("? Answer:")
        self.n_pairs = self.params.n_pairs
        self.pairs_used: int | None = None  # pairs in the last content's prompt (with --context-tokens: as fit)
        self.format = self._format(self.params.n_pairs if self.params.context_tokens is None else None)
        if self.params.context_tokens is None:
            self._check_pairs(self.params.n_pairs)

    def spec(self) -> dict:
        pairs = self.n_pairs if self.params.context_tokens is None else self.pairs_used
        return {
            "probe": self.name + " (text)",
            **asdict(self.params),
            "pair_format_used": self.format.name,
            "fillers": sorted({p.text for p in self.fillers.known.values()}),
            "min_gap": self.min_gap,
            "pairs": pairs,
        }

    def _one_token(self, text: str) -> int:
        ids = self.encode(text)
        if len(ids) != 1:
            raise ProbeError(f"{text!r} is {len(ids)} tokens with this tokenizer; the probe needs it to be one")
        return ids[0]

    def _format(self, n_pairs: int | None) -> PairFormat:
        """The pair format asked for; ``auto``: pieces when the tokenizer has enough single-token
        pieces for ``n_pairs`` (None: a context of ``context_tokens``), else numbers."""
        name = self.params.pair_format
        if name == "auto":
            needed = n_pairs if n_pairs is not None else max(self.params.lengths()) // LINE
            name = "pieces" if len(self.words) >= needed + self.params.n_distractors + 1 else "numbers"
        return PairFormat(name, self.tokenizer, self.words)

    def _single_token_words(self) -> list[int]:
        """Ids of ' word' pieces (lowercase letters, 3+) that encode back to themselves: about a second
        on a 129K vocabulary, so kept on disk per tokenizer file (``words_cache``), a sweep's start-up
        paid once per machine."""
        cache = words_cache(self.tokenizer)
        if cache is not None and cache.is_file():
            try:
                return [int(i) for i in json.loads(cache.read_text())]
            except (OSError, ValueError, TypeError):
                pass  # a damaged cache is computed again
        words = self._scan_words()
        if cache is not None:
            try:
                cache.parent.mkdir(parents=True, exist_ok=True)
                partial = cache.with_suffix(f".{os.getpid()}.tmp")
                partial.write_text(json.dumps(words))
                partial.replace(cache)  # atomic: a concurrent reader sees the whole file or none
            except OSError:
                pass  # an unwritable cache only costs the second next time
        return words

    def _scan_words(self) -> list[int]:
        ids = sorted(self.tokenizer.get_vocab().values())
        fast = _backend(self.tokenizer)  # the Rust tokenizer: one call for the whole vocabulary
        texts = [self.decode([i]) for i in ids] if fast is None else fast.decode_batch([[i] for i in ids], False)
        wanted = [(i, t) for i, t in zip(ids, texts, strict=True) if len(t) >= 4 and t[0] == " " and _word(t[1:])]
        encoded = encode_many_fast(self.tokenizer, [t for _, t in wanted])
        return [i for (i, _), back in zip(wanted, encoded, strict=True) if back == [i]]

    def _pairs_needed(self, span: int) -> int:
        """Pairs for a haystack long enough that the needle ends >= min_gap tokens before the
        question's last token at every offset: (1 - depth) * (H - moves) + question >= min_gap - 1
        (lines of at least LINE tokens)."""
        question_len = len(self.ask[0]) + 1 + len(self.ask[1])
        moves = span if needle_moves(self.params.design) else 0
        if self.params.depth >= 1 and self.min_gap > question_len + 1:
            raise ProbeError("depth=1 puts the needle right before the question, inside the raw window; lower --depth")
        # the filler a design may put before the question is not counted: at some offsets it is none
        room = max(0, self.min_gap - 1 - question_len) / max(1 - self.params.depth, 1e-9)
        first = 2 * LINE + max(self.params.kv_gaps)
        same_phase = self.step if self.params.same_phase else 0  # the base may move by up to a step
        return max(self.params.n_pairs, math.ceil((room + moves + first + same_phase) / LINE) + 1)

    def _check_pairs(self, n_pairs: int) -> None:
        words = len(self.format.words)
        if self.format.name == "pieces" and words < n_pairs + self.params.n_distractors + 1:
            raise ProbeError(
                f"the tokenizer has only {words} single-token pieces; {n_pairs} distinct keys and "
                f"{self.params.n_distractors + 1} distinct values are needed (the haystack needs {n_pairs} pairs to "
                "put the needle beyond the model's raw window); use --pair-format numbers, codes or auto, a "
                "tokenizer with more pieces, or a lower --depth"
            )

    def stream(self, offsets: list[int], n_samples: int, rng: np.random.Generator) -> Iterator[list[ProbeItem]]:
        """Every content at every offset (and kv-gap); with several ``--context-tokens``, each content
        is drawn at each length band (its own random stream per band)."""
        yield from by_length(self, offsets, n_samples, rng)

    def at_length(self, n: int) -> TextKVRetrievalProbe:
        """This probe at one length band."""
        part = copy.copy(self)
        part.params = self.params.at_length(n)
        part.fillers, part.gaps = self.fillers, self.gaps  # shared: what worked at one length is tried first
        part.format = part._format(None)
        return part

    def _stream(self, offsets: list[int], n_samples: int, rng: np.random.Generator) -> Iterator[list[ProbeItem]]:
        span = max(offsets)
        if self.params.context_tokens is None:
            self.n_pairs = self._pairs_needed(span)
            self.format = self._format(self.n_pairs)
            self._check_pairs(self.n_pairs)
        for content_id in range(n_samples):
            content = self._content(span, rng)
            self._check_content(content, content_id, offsets[0])
            ends = end_shifts(self.params.design, offsets, self.step, rng)
            yield [
                self._place(content, content_id, d, gap, variant, ends[d])
                for variant, gap in enumerate(self.params.kv_gaps)
                for d in offsets
            ]

    def _content(self, span: int, rng: np.random.Generator) -> Content:
        keys, values, needle = self._draw(span, rng)
        self.pairs_used = len(keys)
        lines = [keys[i] + [self.sep] + values[i] + [self.newline] for i in range(len(keys)) if i != needle]
        ends = np.cumsum([len(line) for line in lines]).tolist()
        slack = max(len(k) + len(v) + 2 for k, v in zip(keys, values, strict=True)) - 1
        lead = int(rng.integers(0, slack + 1))
        moves = span if needle_moves(self.params.design) else 0
        # the needle (its key moved back by a gap) after the lead and the first line, so fillers never touch
        first = 2 * (slack + 1) + max(self.params.kv_gaps)
        base = first + int(self.params.depth * max(0, lead + ends[-1] - moves - first))
        shift = self._phase_shift(base, len(keys[needle]), first, lead + ends[-1] - moves)
        question = self.ask[0] + keys[needle] + self.ask[1]
        candidates = {"right": values[needle]} | self._distractors(values, needle)
        return Content(
            lines, ends, keys[needle], values[needle], question, candidates, base + shift, lead, slack, shift
        )

    def _phase_shift(self, base: int, key_len: int, lowest: int, highest: int) -> int:
        """Tokens to move the needle's base (within [lowest, highest]) so that its anchor -- the
        value's first token, ``head + base + key + separator`` at offset 0 -- sits at phase 0
        (0 without ``same_phase``)."""
        if not self.params.same_phase or self.step <= 1:
            return 0
        anchor = self.lead_in + len(self.head) + base + key_len + 1
        later = (self.align - anchor) % self.step
        for shift in (later, later - self.step):
            if shift == 0 or lowest <= base + shift <= highest:
                return shift
        raise ProbeError(
            f"the haystack is too short to move the needle by up to {self.step} tokens to one phase; raise the number "
            "of pairs (--context-tokens) or pass --mixed-phase"
        )

    def _draw(self, span: int, rng: np.random.Generator):
        """Keys, values and the needle's index: ``n_pairs`` pairs, or as many as fill ``context_tokens``."""
        budget = self.params.context_tokens
        if budget is None:
            keys, values = self.format.draw(self.n_pairs, rng)
            return keys, values, int(rng.integers(0, self.n_pairs))
        most = min(budget // LINE, self.format.max_pairs())
        keys, values = self.format.draw(most, rng)
        longest = max(len(k) + len(v) + 2 for k, v in zip(keys, values, strict=True))
        fixed = len(self.head) + len(self.ask[0]) + len(self.ask[1]) + max(map(len, keys)) + max(map(len, values))
        fixed += 2 * longest - 1 + max(self.params.kv_gaps)  # the lead (< a line) and the needle line
        design = self.params.design  # filler around the needle, the pad after BOS, filler before the question
        fixed += (longest - 1 if needle_moves(design) else 0) + (span if prefix_padded(design) else 0)
        fixed += most_end_filler(design, span, self.step)
        lengths = np.cumsum([len(k) + len(v) + 2 for k, v in zip(keys, values, strict=True)])
        n = int(np.searchsorted(lengths, budget - fixed, side="right"))
        if n == len(keys) and most < budget // LINE:  # the format ran out of distinct keys before the context
            raise ProbeError(
                f"the {self.format.name} format has {self.format.max_pairs()} distinct keys with this tokenizer, "
                f"{int(lengths[-1])} tokens of pairs, short of --context-tokens {budget}; use --pair-format numbers, "
                "codes or auto, or a shorter --context-tokens"
            )
        if n < self.params.n_distractors + 2:
            raise ProbeError(
                f"--context-tokens {budget} leaves room for {n} pairs; at least {self.params.n_distractors + 2} "
                "are needed: raise --context-tokens"
            )
        return keys[:n], values[:n], int(rng.integers(0, n))

    def _text(self, ids) -> str:
        return self.decode(list(ids))

    def _place(self, c: Content, content_id: int, d: int, gap: int, variant: int, end: int = 0) -> ProbeItem:
        """Content ``c`` at offset ``d``; ``end``: filler tokens before the question (designs.end_shifts)."""
        shift = needle_moves(self.params.design)
        where = f"content {content_id} offset {d}"
        target = c.base + (d if shift else 0) - gap  # the needle key's position in the haystack
        k = bisect.bisect_right([0, *c.ends], target - c.lead) - 1  # the needle goes before line k (k >= 1)
        f = target - c.lead - c.boundary(k)  # filler tokens between line k-1 and the needle
        line = c.key + [self.sep] + list(self._gap(c, gap, where).ids) + c.value + [self.newline]
        before_line = self._text(c.lines[k - 1])
        after_line = self._text(c.lines[k]) if k < len(c.lines) else self._text(c.question)
        filled = self.fillers.between(before_line, self._text(line), f, where)
        after = self.fillers.between(self._text(line), after_line, c.slack - f if shift else 0, where)
        padded = c.lead + (d if prefix_padded(self.params.design) else 0)
        lead = self.fillers.between(self._text(self.intro), self._text(c.lines[0]), padded, where)
        hay = [t for ln in c.lines[:k] for t in ln]
        rest = [t for ln in c.lines[k:] for t in ln]
        last = c.lines[-1] if k < len(c.lines) else line + list(after.ids)  # what the end filler follows
        tail = self.fillers.between(self._text(last), self._text(c.question), end, where)
        body = hay + list(filled.ids) + line + list(after.ids) + rest
        prompt = self.head + list(lead.ids) + body + list(tail.ids) + c.question
        key_pos = len(self.head) + lead.tokens + len(hay) + f
        value_pos = key_pos + len(c.key) + 1 + gap
        self._check_splice(prompt, c, k, len(lead.ids), len(line) + len(filled.ids) + len(after.ids), where)
        if end and not self._reads_back(prompt[len(prompt) - len(c.question) - end - len(last) :]):
            raise ProbeError(
                f"{where}: the tokenizer re-tokenizes the filler before the question differently from the planned "
                "ids, so the prompt's length would differ; use another --filler"
            )
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
            padding=self._padding(filled if shift else lead, tail) | self._moved(c),
        )

    def _padding(self, moved: Padding, tail: Padding) -> dict:
        """What moved the anchor (the filler before the needle, or the pad after BOS) and, for the
        designs that move the prompt end, the filler before the question (``end_*``)."""
        record = moved.record() if self.params.design != "shift-end" else {}
        if self.params.design in ("shift-end", "crossed"):
            record |= {f"end_{name}": value for name, value in tail.record().items()}
        return record

    def _moved(self, c: Content) -> dict:
        """What the record says of the move to one phase (nothing without ``same_phase``)."""
        return {"same_phase_shift": c.shift} if self.params.same_phase else {}

    def _gap(self, c: Content, gap: int, where: str) -> Padding:
        left = self._text(c.key + [self.sep])
        return self.gaps.between(left, self._text(c.value + [self.newline]), gap, where)

    def _distractors(self, values: list[list[int]], needle: int) -> dict[str, list[int]]:
        """Values of the nearest pairs whose value differs from the answer and from each other."""
        chosen, seen = {}, {tuple(values[needle])}
        for i in sorted(range(len(values)), key=lambda i: (abs(i - needle), i)):
            if tuple(values[i]) not in seen and len(chosen) < self.params.n_distractors:
                seen.add(tuple(values[i]))
                chosen[f"pair{i - needle:+d}"] = values[i]
        return chosen

    def _reads_back(self, ids: list[int]) -> bool:
        return self.encode(self.decode(ids)) == ids

    def _check_content(self, c: Content, content_id: int, d: int) -> None:
        """Once per content: the whole prompt at its first offset, and every candidate after the question."""
        prompt = self._place(c, content_id, d, 0, 0).input_ids
        body = prompt[1:] if self.bos is not None else prompt
        if not self._reads_back(body):
            raise ProbeError(
                f"content {content_id} offset {d}: the tokenizer re-tokenizes the haystack differently from the "
                "planned ids, so positions would shift; use another --pair-format or --filler"
            )
        for name, answer in c.candidates.items():
            if not self._reads_back(self.ask[1] + answer):
                raise ProbeError(
                    f"content {content_id}: candidate {name!r} merges with the end of the question when tokenized; "
                    "use another --pair-format"
                )

    def _check_splice(self, prompt: list[int], c: Content, k: int, lead: int, spliced: int, where: str) -> None:
        """At every offset: the lines around the needle and its fillers, and the lead with the
        lines on both sides, read back as planned."""
        start = len(self.head) + lead  # the first line's first token
        hi = start + c.boundary(k + 1) + spliced if k < len(c.lines) else len(prompt)
        regions = [(start + c.boundary(k - 1), hi), (len(self.head) - len(self.intro), start + c.boundary(1))]
        for a, b in regions:
            if not self._reads_back(prompt[a:b]):
                raise ProbeError(
                    f"{where}: the tokenizer re-tokenizes the text around the needle or the padding differently "
                    "from the planned ids, so positions would shift; use another --pair-format or --filler"
                )
