"""What a sweep checks before it scores anything: the offsets (each once, every phase at two
offsets or more, within memory), and every item of the first pass (a needle outside the raw
window, prompts within the model's length and vocabulary, planned keys unique), with what the
scoring pass needs to know (whether every candidate is one token, the longest prompt, the cost)."""

from __future__ import annotations

from collections import Counter

from phasescope.backends.base import Backend, item_key, prompt_digest
from phasescope.limits import PROMPT_TOKEN_BYTES, refuse_beyond_memory
from phasescope.probes.base import ProbeError, ProbeItem, check_needle_placement
from phasescope.specs import Geometry, offsets_text


def check_offsets(offsets: list[int], step: int) -> None:
    repeated = sorted(d for d, n in Counter(offsets).items() if n > 1)
    if repeated:
        raise ProbeError(f"offsets {repeated} are listed more than once; list each offset once")
    if len(set(offsets)) < 2 * step:
        raise ProbeError(
            f"offsets cover {len(set(offsets))} values, fewer than two periods of step {step}; "
            f"use at least {2 * step} offsets, e.g. --offsets 0:{max(24, 2 * step)}"
        )
    # a content's prompts are held together (one per offset), each at least its offset long, as Python ints
    ordered = sorted(offsets)
    refuse_beyond_memory(
        "--offsets",
        len(ordered),
        lambda n: PROMPT_TOKEN_BYTES * sum(ordered[:n]) + n * 4096,
        "a content's prompts at every offset are built together",
        shown=lambda n: offsets_text(ordered[:n]) if n else "0",
    )


class SweepChecks:
    """Every check a sweep makes on its items, fed one content at a time (the first pass over the
    probe's stream, before anything is scored), and what the scoring pass needs to know: the
    planned record keys, whether every candidate is one token, the longest prompt, the cost."""

    def __init__(self, geometry: Geometry, vocab_size: int | None, max_len: int | None):
        self.step, self.align, self.vocab_size, self.max_len = geometry.step, geometry.align, vocab_size, max_len
        self.local, self.window = geometry.local, geometry.window
        self.seen: dict[int, set] = {p: set() for p in range(self.step)}
        self.keys: dict[tuple, str] = {}  # planned record key -> its prompt's digest (what a resume keeps)
        self.single = True
        self.longest = 0
        self.prompt_tokens = self.candidate_tokens = self.n_candidates = 0
        self.prefixes = 0  # distinct candidate prefixes over items: a served model's requests without echo

    def add(self, items: list[ProbeItem]) -> None:
        check_needle_placement(items, self.local, self.window)
        for item in items:
            self.seen[(item.anchor_pos - self.align) % self.step].add(item.offset)
            self.keys[item_key(item)] = prompt_digest(item)
            empty = [name for name, tokens in item.candidates.items() if not tokens]
            if empty or not item.input_ids:
                what = f"candidate {empty[0]!r}" if empty else "its prompt"
                raise ProbeError(
                    f"content {item.content_id!r}: {what} tokenizes to no tokens with this tokenizer, so there is "
                    "nothing to score; write it with characters the tokenizer keeps (e.g. a word, not only spaces)"
                )
            if len(item.candidates) > 1 and len({tuple(c) for c in item.candidates.values()}) == 1:
                raise ProbeError(
                    f"content {item.content_id!r}: every candidate tokenizes to the same ids "
                    f"{list(next(iter(item.candidates.values())))[:8]}, so none can be told from another (the "
                    "tokenizer does not know their text: an unknown-token id?); use the model's own tokenizer"
                )
            lengths = [len(c) for c in item.candidates.values()]
            self.single = self.single and max(lengths) == 1
            self.longest = max(self.longest, len(item.input_ids) + max(lengths))
            self.prompt_tokens += len(item.input_ids)
            self.candidate_tokens += len(item.input_ids) * len(lengths) + sum(lengths)
            self.n_candidates += len(lengths)
            self.prefixes += len({tuple(c[:j]) for c in item.candidates.values() for j in range(len(c))})
            self._check_length(item, len(item.input_ids) + max(lengths))
            self._check_vocab(item)

    def _check_length(self, item: ProbeItem, length: int) -> None:
        if self.max_len is not None and length > self.max_len:
            raise ProbeError(
                f"content {item.content_id} at offset {item.offset} needs {length} tokens but the model accepts "
                f"at most {self.max_len} (its max_position_embeddings); nothing is truncated: use fewer pairs "
                "(--context-tokens), fewer offsets or a shorter prompt"
            )

    def _check_vocab(self, item: ProbeItem) -> None:
        if self.vocab_size is None:
            return
        top = max(max(item.input_ids), max(t for c in item.candidates.values() for t in c))
        if top >= self.vocab_size:
            raise ProbeError(
                f"the probe uses token id {top} but the model's vocabulary has {self.vocab_size} ids; "
                "build the probe from the model's own task or tokenizer"
            )

    def finish(self) -> None:
        if not self.keys:
            raise ProbeError("the probe produced no items; ask for at least one sample (--samples)")
        thin = {p: len(ds) for p, ds in self.seen.items() if len(ds) < 2}
        if thin:
            raise ProbeError(
                f"the offsets put the anchor at phase(s) {sorted(thin)} at fewer than two offsets ({thin}); every "
                f"phase needs at least two so that phase effects and periods are estimable: use consecutive "
                f"offsets, e.g. --offsets 0:{max(24, 2 * self.step)}"
            )

    def plan(self, model: Backend) -> dict:
        """What scoring costs: records, forward passes or server requests, tokens."""
        records = len(self.keys)
        sequences = records if self.single else self.n_candidates
        cost = model.cost(records, sequences, self.n_candidates, self.prefixes)
        tokens = self.prompt_tokens if self.single or model.reuses_cache() else self.candidate_tokens
        return {"records": records, **cost, "prompt_tokens": tokens, "longest_sequence": self.longest}
