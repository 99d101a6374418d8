"""Measured padding: text that makes a prompt exactly as many tokens long as a probe needs.

Real BPE tokenizers do not add one token per pad character. DeepSeek-V4's pre-tokenizer glues
a run of punctuation to the newlines after it, and its vocabulary holds ``==``, ``====``,
``========`` and ``================``: a docstring line of n ``=`` signs is 1 to 4 tokens, not
n (the table in docs/sweeps.md, made by ``experiments/pad_table.py``). So a probe never
assumes a token count. For every prompt length it needs, it tries a small family of padding
strings (``family``) and keeps the first whose ids, in place, give exactly that length with
the text on both sides reading back as planned; positions are then measured from the ids
actually sent, and what was used is recorded (``Padding.record``: text, characters, units,
tokens)::

    before                 padding (any characters)        after
    '...cast it.\\n'        '================\\n===='          '\\n    \"\"\"\\n    amax = ...'
                           ^ the padding region             ^ every token as without padding

"As planned" means: every token of the unpadded prompt is in the padded one, in order, with
the padding region in one place. Two modes:

* ``fuse_space=True`` (prompts encoded whole: padding-completion, prompts:): a whitespace-only
  token right next to the padding may fuse into it (DeepSeek turns the newline ending a line of
  ``=`` into ``=\\n``); it carries nothing the model is asked about.
* ``fuse_space=False`` (prompts assembled from ids: the text kv-retrieval haystack): nothing
  may change; the padding's own ids are spliced between its neighbours' ids.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from phasescope.probes.base import ProbeError

Encode = Callable[[str], list[int]]


@dataclass(frozen=True)
class Padding:
    text: str  # the string inserted
    units: int  # copies of the pad unit in it (e.g. the number of '=' signs)
    tokens: int  # tokens the padding region takes in the prompt sent
    ids: tuple[int, ...] = ()  # the padding region's ids (strict mode: spliced between neighbours)

    def record(self) -> dict:
        """What a record carries: the padding as text and as counted in characters, units and tokens."""
        return {"text": self.text, "chars": len(self.text), "units": self.units, "tokens": self.tokens}


def shapes(unit: str, most_units: int, single_run: bool = False) -> list[list[tuple[str, int]]]:
    """The padding shapes of ``unit``, in the order they are tried; each is a list of (text,
    units) for growing counts k, starting from nothing.

    One run of k units (the study's ``=`` padding, whose k was its variable); k lines of m units
    for m = 1..8 (a docstring of ``=`` lines: under a BPE that merges runs, a line of one ``=``
    is often one token); k units each with a space before, or after. ``single_run``: the run only.
    """
    runs = [[unit * k for k in range(most_units + 1)]]
    lines = [["\n".join([unit * m] * k) for k in range(most_units // m + 1)] for m in range(1, 9)]
    spaced = [[piece * k for k in range(most_units + 1)] for piece in (" " + unit, unit + " ")]
    # units counted in the text inserted: a newline unit's joining newlines are units too
    counted = [[(text, text.count(unit)) for text in shape] for shape in runs + lines + spaced]
    return counted[:1] if single_run else counted


def _is_space(decode: Callable[[list[int]], str] | None, token: int) -> bool:
    """A whitespace-only token (False when the tokenizer cannot decode: nothing may fuse then)."""
    return decode is not None and decode([token]).strip() == ""


def encode_sides(encode: Encode, before: str, after: str, head: tuple[int, ...] = ()) -> tuple[list[int], list[int]]:
    """The ids of the text before the padding (after ``head``) and after it, each encoded on its
    own: what every padded prompt must keep. A search encodes them once, not once per padding."""
    return list(head) + encode(before), encode(after)


def fit(
    encode: Encode,
    decode,
    before: str,
    after: str,
    pad: str,
    fuse_space: bool,
    head: tuple[int, ...] = (),
    sides: tuple[list[int], list[int]] | None = None,
) -> tuple[list[int], int, int] | None:
    """(the padded prompt's ids, start, end of the padding region in them) when the text before
    and after the padding reads back as each does on its own (whitespace tokens next to the
    padding may fuse into it when ``fuse_space``), else None. ``head``: ids before the text (BOS);
    ``sides``: ``encode_sides`` of before and after, when the caller has them."""
    planned_before, planned_after = sides or encode_sides(encode, before, after, head)
    padded = list(head) + encode(before + pad + after)
    start = common_length(planned_before, padded)
    end = len(padded) - common_length(planned_after[::-1], padded[start:][::-1])
    lost = planned_before[start:] + planned_after[: len(planned_after) - (len(padded) - end)]
    if lost and not (fuse_space and all(_is_space(decode, t) for t in lost)):
        return None
    return padded, start, end


def common_length(a: list[int], b: list[int]) -> int:
    """Length of the common prefix of a and b (compared in numpy: prompts run to 128K ids)."""
    n = min(len(a), len(b))
    differ = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(differ[0]) if len(differ) else n


def measure(
    encode: Encode,
    decode,
    before: str,
    after: str,
    shape: list[tuple[str, int]],
    fuse_space: bool,
    head=(),
    sides: tuple[list[int], list[int]] | None = None,
) -> dict[int, Padding]:
    """Prompt length -> the first padding of ``shape`` giving it (paddings that change the text
    around them are left out). ``sides``: as for ``fit``."""
    sides = sides or encode_sides(encode, before, after, head)
    found: dict[int, Padding] = {}
    for text, units in shape:
        placed = fit(encode, decode, before, after, text, fuse_space, head, sides)
        if placed is not None and len(placed[0]) not in found:
            ids, start, end = placed
            found[len(ids)] = Padding(text, units, end - start, tuple(ids[start:end]))
    return found


def first_base(reached: set[int], offsets: list[int], lowest: int, step: int, align: int) -> int | None:
    """The smallest prompt length b >= ``lowest`` with b = align (mod step) such that every
    b + d (d in ``offsets``) was reached: at offset d the answer then sits at phase d mod step."""
    top = max(reached, default=lowest - 1)
    b = lowest + (align - lowest) % step
    while b + max(offsets) <= top:
        if all(b + d in reached for d in offsets):
            return b
        b += step
    return None


def missing_offsets(reached: set[int], offsets: list[int], lowest: int, step: int, align: int) -> list[int]:
    """The offsets no padding reaches at the best base (the one reaching most), for the error."""
    top = max(reached, default=lowest)
    best: list[int] | None = None
    b = lowest + (align - lowest) % step
    while best is None or b <= top:
        missing = [d for d in offsets if b + d not in reached]
        if best is None or len(missing) < len(best):
            best = missing
        b += step
    return best


@dataclass(frozen=True)
class Placement:
    """One prompt padded so that its answer sits at ``base + d`` at every offset d."""

    unit: str  # the pad unit whose family reached every offset
    base: int  # the prompt's length (= the answer position) at offset 0
    paddings: dict[int, Padding]  # offset -> padding


class AnswerPlacer:
    """Pads prompts at one place so that the answer (the token after the prompt) takes every
    phase: at offset d it sits at ``base + d`` with ``base = align (mod step)``, so one offset is
    one phase for every prompt, however long. ``head``: ids sent before the text (BOS).

    One shape serves every offset when one can (the first of ``shapes`` that reaches them all:
    at offset d, k = d + c copies, lines or spaced units); otherwise each offset takes the first
    shape that reaches its length."""

    def __init__(
        self,
        encode: Encode,
        decode,
        step: int,
        align: int,
        head: tuple[int, ...] = (),
        max_len: int | None = None,
        single_run: bool = False,
    ):
        self.encode, self.decode, self.step, self.align, self.head = encode, decode, step, align, head
        self.max_len = max_len  # the model's longest sequence: a prompt that cannot fit is refused before the search
        self.single_run = single_run  # only one run of the unit (the study's literal padding), no other shape

    def place(self, before: str, after: str, units: tuple[str, ...], offsets: list[int], label: str) -> Placement:
        """The first unit whose padding reaches every offset; ProbeError naming the offsets none reaches.

        A long prompt is searched on the text around the padding (``LOCAL_CHARS`` each side: a
        tokenizer's merges do not reach that far), its lengths shifted by what the rest adds, and
        the chosen padding of every offset is then checked on the whole prompt; if any check fails
        the whole prompt is searched, as for a short one. So a 1M-word prompt costs one encoding per
        offset instead of one per padding tried."""
        lowest = len(self.head) + len(self.encode(before + after))
        if self.max_len is not None and lowest + max(offsets) > self.max_len:
            raise ProbeError(
                f"{label}: the prompt is {lowest} tokens, so at offset {max(offsets)} it would be at least "
                f"{lowest + max(offsets)}, more than the model's {self.max_len} (its max_position_embeddings); "
                "nothing is truncated: shorten the prompt or use smaller offsets"
            )
        if len(before) > LOCAL_CHARS or len(after) > LOCAL_CHARS:
            local = self._place_locally(before, after, units, offsets, lowest)
            if local is not None:
                return local
        placed, unreached = self._search(before, after, units, offsets, lowest)
        if placed is not None:
            return placed
        if self.single_run:
            raise ProbeError(
                f"{label}: one run of the pad unit does not put the answer at every offset with this tokenizer "
                f"(unreached: {'; '.join(unreached)}): its merges turn runs of different lengths into the same "
                "number of tokens, so some prompt lengths are never reached; drop --single-run (lines of the unit "
                "or spaced units then fill the gaps), or sweep only the offsets it reaches (those not listed)"
            )
        raise ProbeError(
            f"{label}: no padding puts the answer at every offset with this tokenizer without changing the text "
            f"around it (unreached, by pad unit: {'; '.join(unreached)}); pass another pad unit or filler, or put the "
            "padding where it cannot merge with its neighbours (e.g. on a line of its own)"
        )

    def _search(self, before: str, after: str, units, offsets: list[int], lowest: int, shift: int = 0):
        """(the placement, None) or (None, the unreached offsets by unit); ``shift``: tokens the
        text outside ``before`` and ``after`` adds to every length (the local search)."""
        most_units = 2 * (max(offsets) + 4 * self.step) + 8  # a unit rarely takes under half a token
        sides = encode_sides(self.encode, before, after, self.head)
        unreached = []
        for unit in units:
            mixed: dict[int, Padding] = {}
            for shape in shapes(unit, most_units, self.single_run):
                measured = measure(self.encode, self.decode, before, after, shape, True, self.head, sides)
                found = {n + shift: pad for n, pad in measured.items()}
                for tables in (found, mixed | {n: p for n, p in found.items() if n not in mixed}):
                    base = first_base(set(tables), offsets, lowest, self.step, self.align)
                    if base is not None:
                        return Placement(unit, base, {d: tables[base + d] for d in offsets}), []
                mixed = mixed | {n: p for n, p in found.items() if n not in mixed}
            missing = missing_offsets(set(mixed), offsets, lowest, self.step, self.align)
            unreached.append(f"{unit!r}: offsets {missing}")
        return None, unreached

    def _place_locally(self, before: str, after: str, units, offsets: list[int], lowest: int) -> Placement | None:
        """The search on the text around the padding, every offset then checked on the whole
        prompt (its length and the padding's ids in place); None when a check fails."""
        near_before, near_after = before[-LOCAL_CHARS:], after[:LOCAL_CHARS]
        shift = lowest - len(self.head) - len(self.encode(near_before + near_after))
        placed, _ = self._search(near_before, near_after, units, offsets, lowest, shift)
        if placed is None:
            return None
        sides = encode_sides(self.encode, before, after, self.head)
        for d, pad in placed.paddings.items():
            whole = fit(self.encode, self.decode, before, after, pad.text, True, self.head, sides)
            if whole is None or len(whole[0]) != placed.base + d or tuple(whole[0][whole[1] : whole[2]]) != pad.ids:
                return None
        return placed


LOCAL_CHARS = 4096  # characters each side of the padding that a long prompt's search reads
