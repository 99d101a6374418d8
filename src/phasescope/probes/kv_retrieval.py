"""``kv-retrieval``: a haystack of key->value pairs, then a query for one key (the needle).

Native ids reuse the training generator (phasescope.data.retrieval.sample_row): each
content sample is a training row cut after its first query's key, so evaluation sees the
training distribution. The queried pair (the needle) is taken out of the row and put back
at a fixed base position, the same for every content sample, so at offset d every
sample's anchor sits at ``base + d``: one phase per offset.

Shift-needle (content and total length fixed, query position fixed): the needle is put
back after the first ``base + d`` tokens of the row without it, so it slides through the
haystack (a pair it lands in is split; that pair is never queried or scored)::

    BOS  f K V f K V ... [Kn Vn] ... K V f K V  f f f ... f | Q Kn -> Vn
                         ^key_pos = base + d                  ^ answer_pos (fixed)

Pad-prefix: the needle at ``base`` and the first d tokens of a fixed random filler string
right after BOS, so everything after BOS shifts by d. The anchor is the needle's first
value token; the query is always more than ``min_distance`` tokens after the needle, and at
least ``min_gap`` (the model's raw window plus one compression window) after its last token.
``depth`` places ``base`` in the room the haystack leaves (0 earliest, 1 latest).

Long contexts (``context_tokens``, e.g. 131072): the haystack is the task's training rows
laid end to end (their queries cut off) up to that many tokens, a fresh needle (key, value)
placed at ``depth`` of it, and one query at the end; pairs elsewhere with the needle's key lose
their key (it becomes filler), so the question has one answer. Keys repeat across rows, as
they cannot all be distinct in a small vocabulary; only the needle's must be unique.

Same-window variants (``kv_gaps``, e.g. (0, 1)): each content is also rendered with g filler
tokens between the needle's key and value. The value keeps its position (the key moves
back), so at every offset the variants share the value's phase and differ only in whether
key and value fall into one compression window::

    g = 0:   ... K  V ...          g = 1:   ... K  f  V ...
                    ^ value_pos = base + d         ^ same value_pos
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import asdict, replace

import numpy as np

from phasescope.data.retrieval import BOS, QUERY, RetrievalTask, sample_row
from phasescope.designs import end_shifts, most_end_filler, needle_moves, prefix_padded
from phasescope.probes.base import Probe, ProbeContext, ProbeError, ProbeItem, by_length
from phasescope.probes.kv_options import KVRetrievalSpec, Options, TextKVSpec  # noqa: F401  (the registry's)
from phasescope.probes.kv_retrieval_text import TextKVRetrievalProbe

SUMMARY = "haystack of key-value pairs, query one key: native ids (the model's task) or text (a tokenizer)"
INPUTS = ("ids", "text")  # built on a native model's own task, or written in text with a tokenizer


class KVRetrievalProbe(Probe):
    name = "kv-retrieval"
    summary = "haystack of key->value pairs; query one key, the answer is its value"
    has_keys = True

    def __init__(self, task: RetrievalTask, spec: KVRetrievalSpec | None = None, min_gap: int = 0, step: int = 1):
        self.params, self.min_gap, self.step = spec or KVRetrievalSpec(), min_gap, step
        if self.params.n_pairs and self.params.n_pairs != task.n_pairs:  # scale the haystack, keep the rest
            extra = (self.params.n_pairs - task.n_pairs) * (task.pair_len + task.max_gap)
            task = replace(task, n_pairs=self.params.n_pairs, seq_len=task.seq_len + max(extra, 0))
        self.task = task
        if self.params.n_distractors > task.n_pairs - 2:
            raise ProbeError(f"n_distractors={self.params.n_distractors} needs more pairs than {task.n_pairs}")

    def spec(self) -> dict:
        return {"probe": self.name, **asdict(self.params), "min_gap": self.min_gap, "task": self.task.to_dict()}

    def base(self, span: int, answer: int | None = None) -> int:
        """Needle key position at offset 0 (variant g = 0), at ``depth`` in the room the haystack
        leaves; ``answer``: the answer position of the haystack with the needle (default: a row's)."""
        t = self.task
        if answer is None:
            answer = t.seq_len - t.n_queries * t.query_len + 1 + t.key_len  # the first query's, in a row
        query_start = answer - 1 - t.key_len
        moves = span if needle_moves(self.params.design) else 0
        last = min(
            query_start - t.min_distance - t.pair_len - moves - 1,  # as in training: beyond min_distance
            answer - t.pair_len - self.min_gap - moves,  # beyond the model's raw window + one window
        )
        first = 1 + max(self.params.kv_gaps)  # room for the key to move back in gapped variants
        if last < first:
            raise ProbeError(self._no_room(span, answer, last, moves))
        return first + int(self.params.depth * (last - first))

    def _no_room(self, span: int, answer: int, last: int, moves: int) -> str:
        """Why the needle has no place, naming the one setting at fault: the key-value gaps, the raw
        window (``--local``), or the offsets."""
        t, gaps = self.task, self.params.kv_gaps
        if last >= 1:  # the offsets fit; the gapped key does not
            return (
                f"--kv-gaps {','.join(map(str, gaps))}: a gap of {max(gaps)} tokens between the needle's key and "
                f"value does not fit in prompts of {answer} tokens (the offsets alone would); use gaps of at most "
                f"{max(0, last - 1)} tokens"
            )
        if answer - t.pair_len - self.min_gap < 1:  # even offset 0 is inside the raw window
            return (
                f"the model's raw window + one compression window ({self.min_gap} tokens before the question, kept "
                f"uncompressed) is longer than the prompts of {answer} tokens: no needle can sit where only "
                "compression reaches it; if the model's raw window is smaller, say so with a smaller --local, else "
                "sweep longer prompts (--context-tokens, or a longer task.seq_len)"
            )
        return (
            f"offsets up to {span} do not fit: the needle must end more than {t.min_distance} tokens (the "
            f"task's min_distance) and at least {self.min_gap} tokens (the model's raw window + one compression "
            f"window) before the question, which leaves {max(0, last + moves)} positions in prompts of "
            f"{answer} tokens; use fewer offsets, a longer task (task.seq_len) or --context-tokens"
        )

    def stream(self, offsets: list[int], n_samples: int, rng: np.random.Generator) -> Iterator[list[ProbeItem]]:
        """Every content at every offset (and kv-gap); with several ``--context-tokens``, each content
        is drawn at each length band (its own random stream per band)."""
        if min(offsets) < 0:
            raise ProbeError(f"offsets must be >= 0; got {min(offsets)}")
        yield from by_length(self, offsets, n_samples, rng)

    def at_length(self, n: int) -> KVRetrievalProbe:
        """This probe at one length band."""
        part = copy.copy(self)
        part.params = self.params.at_length(n)
        return part

    def _stream(self, offsets: list[int], n_samples: int, rng: np.random.Generator) -> Iterator[list[ProbeItem]]:
        span = max(offsets)
        long = self.params.context_tokens is not None
        base = None if long else self.base(span)
        for content_id in range(n_samples):
            content = self._long_content(span, rng) if long else self._content(span, rng)
            if long:
                base = self.base(span, len(content["haystack"]) + self.task.pair_len)
            ends = end_shifts(self.params.design, offsets, self.step, rng)
            yield [
                self._place(content, content_id, d, base, gap, variant, ends[d])
                for variant, gap in enumerate(self.params.kv_gaps)
                for d in offsets
            ]

    def _content(self, span: int, rng: np.random.Generator) -> dict:
        """A training row, cut after the first query's key, with its needle taken out."""
        t = self.task
        tokens, _, key_pos, value_pos, answer_pos = sample_row(t, rng)
        key_start, answer = int(key_pos[0]), int(answer_pos[0])
        needle = [int(x) for x in tokens[key_start : key_start + t.pair_len]]
        haystack = [int(x) for x in tokens[:key_start]] + [int(x) for x in tokens[key_start + t.pair_len : answer]]
        # other pairs as (start in the haystack without the needle, value ids), computed once per content
        pairs = [
            (
                start if start < key_start else start - t.pair_len,
                [int(x) for x in tokens[start + t.key_len : start + t.pair_len]],
            )
            for start in _pair_starts(tokens, t)
            if start != key_start
        ]
        pad = [int(x) for x in rng.choice(t.filler_ids, size=span)]
        widest = max(self.params.kv_gaps)  # drawn only when asked, so default sweeps keep their content
        gap_fill = [int(x) for x in rng.choice(t.filler_ids, size=widest)] if widest else []
        content = {"needle": needle, "haystack": haystack, "pairs": pairs, "pad": pad, "gap_fill": gap_fill}
        return content | self._end_fill(span, rng)

    def _end_fill(self, span: int, rng: np.random.Generator) -> dict:
        """Filler for the designs that move the prompt end (drawn only for them, so the other
        designs' contents stay as they were)."""
        most = most_end_filler(self.params.design, span, self.step)
        return {"end_fill": [int(x) for x in rng.choice(self.task.filler_ids, size=most)] if most else []}

    def _long_content(self, span: int, rng: np.random.Generator) -> dict:
        """Training rows end to end (queries cut off) up to ``context_tokens``, a fresh needle,
        one query for its key at the end; other pairs with the needle's key lose their key."""
        t = self.task
        key = [int(x) for x in t.key_ids[rng.integers(0, t.n_keys, size=t.key_len)]]
        value = [int(x) for x in t.value_ids[rng.integers(0, t.n_values, size=t.value_len)]]
        pad_room = span if prefix_padded(self.params.design) else 0
        pad_room += most_end_filler(self.params.design, span, self.step)
        room = self.params.context_tokens - t.query_len - t.pair_len - max(self.params.kv_gaps) - pad_room
        query_start = t.seq_len - t.n_queries * t.query_len
        hay, pairs = [BOS], []
        while len(hay) < room:
            tokens = sample_row(t, rng)[0]
            for start in _pair_starts(tokens, t):
                if [int(x) for x in tokens[start : start + t.key_len]] == key:
                    tokens[start : start + t.key_len] = rng.choice(t.filler_ids, size=t.key_len)
                elif len(hay) + start - 1 + t.pair_len <= room:
                    values = [int(x) for x in tokens[start + t.key_len : start + t.pair_len]]
                    pairs.append((len(hay) + start - 1, values))
            hay += [int(x) for x in tokens[1:query_start]]
        pad = [int(x) for x in rng.choice(t.filler_ids, size=span)]
        widest = max(self.params.kv_gaps)
        gap_fill = [int(x) for x in rng.choice(t.filler_ids, size=widest)] if widest else []
        haystack = hay[:room] + [QUERY] + key
        content = {"needle": key + value, "haystack": haystack, "pairs": pairs, "pad": pad, "gap_fill": gap_fill}
        return content | self._end_fill(span, rng)

    def _place(
        self, content: dict, content_id: int, d: int, base: int, gap: int, variant: int, end: int = 0
    ) -> ProbeItem:
        """Content at offset ``d``; ``end``: filler tokens before the question (designs.end_shifts)."""
        t, p = self.task, self.params
        at = base + (d if needle_moves(p.design) else 0) - gap  # in the haystack without the needle
        pad = content["pad"][:d] if prefix_padded(p.design) else []
        hay, question = content["haystack"], 1 + t.key_len  # the haystack ends with the question: QUERY key
        key_ids, value_ids = content["needle"][: t.key_len], content["needle"][t.key_len :]
        needle = key_ids + content["gap_fill"][:gap] + value_ids
        rest = hay[at:-question] + content["end_fill"][:end] + hay[-question:]
        prompt = hay[:1] + pad + hay[1:at] + needle + rest
        key_pos = len(pad) + at
        candidates = {"right": value_ids}
        for name, values in self._distractors(content, at):
            candidates[name] = values
        value_pos = key_pos + t.key_len + gap
        item = ProbeItem(
            content_id=content_id,
            offset=d,
            input_ids=prompt,
            candidates=candidates,
            target="right",
            anchor_pos=value_pos,
            answer_pos=len(prompt),
            key_pos=key_pos,
            value_pos=value_pos,
            value_last=value_pos + t.value_len - 1,
            variant=variant,
            padding={"end_tokens": end} if end else None,
        )
        if prompt[value_pos : value_pos + t.value_len] != value_ids or prompt[-t.key_len :] != key_ids:
            raise ProbeError(f"internal: needle not at its planned position {key_pos}")
        return item

    def _distractors(self, content: dict, at: int) -> list[tuple[str, list[int]]]:
        """Values of the pairs nearest the needle's new place that it does not split; values
        repeat across pairs (drawn with replacement), so only distinct ones are kept."""
        t = self.task
        unsplit = [
            (abs(start - at), start, values)
            for start, values in content["pairs"]
            if not start < at < start + t.pair_len
        ]
        chosen, seen = [], {tuple(content["needle"][t.key_len :])}
        for _, start, values in sorted(unsplit):
            if tuple(values) not in seen:
                seen.add(tuple(values))
                chosen.append((f"pair@{start}", values))
                if len(chosen) == self.params.n_distractors:
                    break
        return chosen


def _pair_starts(tokens: np.ndarray, task: RetrievalTask) -> list[int]:
    """Key starts of the haystack pairs (keys come from the key id range; queries excluded)."""
    keys = (tokens >= task.key_ids[0]) & (tokens <= task.key_ids[-1])
    query_start = task.seq_len - task.n_queries * task.query_len
    starts, p = [], 1
    while p < query_start:
        if keys[p]:
            starts.append(p)
            p += task.pair_len
        else:
            p += 1
    return starts


def build(ctx: ProbeContext) -> Probe:
    """The native probe on the model's own task (ids), else the same probe in text."""
    p = ctx.spec.options
    if ctx.task is not None:
        if p.pair_format != "auto" or p.filler is not None:
            raise ProbeError("--pair-format and --filler are for text probes; a native model's task fixes its ids")
        spec = KVRetrievalSpec.of(p)
        return KVRetrievalProbe(ctx.task, spec, min_gap=ctx.min_gap, step=ctx.geometry.step)
    if ctx.tokenizer is None:
        raise ProbeError(
            f"kv-retrieval needs the ids of the task {ctx.model} was trained on or a tokenizer, and it has neither: "
            "pass --tokenizer (a tokenizer directory, or deepseek-v4 / qwen3); in Python, task=RetrievalTask(...) "
            "or tokenizer=..."
        )
    spec = TextKVSpec.of(p)
    step, align = ctx.geometry.step, ctx.geometry.align
    return TextKVRetrievalProbe(ctx.tokenizer, spec, bos_id=ctx.bos_id, min_gap=ctx.min_gap, step=step, align=align)
