"""Probe base class: token-exact items that place the same content at many offsets.

A probe builds, for each content sample and each offset, one ``ProbeItem``: the prompt ids
the model reads, the candidate answers (token ids), which one is right, and every position
that matters (DESIGN.md §2: positions index the exact id sequence, BOS included). Probes
check their own token exactness and raise ``ProbeError`` before any scoring starts.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from phasescope.errors import InputError


class ProbeError(InputError):
    """A probe that cannot be built as asked (names the cause and the fix)."""


@dataclass
class ProbeItem:
    content_id: int
    offset: int
    input_ids: list[int]  # the prompt; the answer follows it
    candidates: dict[str, list[int]]  # candidate name -> answer token ids
    target: str  # name of the right candidate
    anchor_pos: int  # position that defines the phase
    answer_pos: int  # position of the first answer token (= len(input_ids))
    key_pos: int | None = None  # first key token (probes with keys)
    value_pos: int | None = None  # first value token of the needle
    value_last: int | None = None  # last value token of the needle
    variant: int = 0  # index of the rendering when a probe renders each content several ways (--kv-gaps)
    # correct when: "greedy" decoding reproduces the target's tokens; "choice": the target has
    # the highest log-prob of the candidates (multiple choice, as lm-evaluation-harness's acc)
    rule: str = "greedy"
    # what moved the anchor, as measured (probes.padding.Padding.record): text, chars, units, tokens
    padding: dict | None = None


def check_needle_placement(items: list[ProbeItem], local: int | None, window: int) -> None:
    """Refuse items whose needle the model could read uncompressed (DESIGN.md §3).

    The query (the position predicting the answer, ``answer_pos - 1``) sees raw tokens
    ``q-L+1 .. q``; the needle's last token must lie at least ``L + window`` tokens before it,
    so the model can only reach it through compressed entries.
    """
    if local is None:
        return
    need = local + window
    for item in items:
        if item.value_last is None:
            continue
        gap = item.answer_pos - 1 - item.value_last
        if gap < need:
            raise ProbeError(
                f"content {item.content_id} at offset {item.offset}: the needle ends {gap} tokens before the question, "
                f"inside the model's raw window (L = {local}) plus one compression window ({window}), so the model "
                f"would read it uncompressed; the needle must end >= {need} tokens before the question. Move it back "
                "(lower --depth), lengthen the prompt (kv-retrieval in words: more pairs; native ids: a task whose "
                f"min_distance >= {need}), or, if the model's raw window is really smaller, pass --local"
            )


class Probe:
    name: ClassVar[str]
    summary: ClassVar[str]
    has_keys: ClassVar[bool] = False

    def items(self, offsets: list[int], n_samples: int, rng: np.random.Generator) -> list[ProbeItem]:
        """Every content sample at every offset (paired design). A probe defines ``items`` or
        ``stream``; each defaults to the other."""
        if type(self).stream is Probe.stream:
            raise NotImplementedError(f"{type(self).__name__} defines neither items nor stream")
        return [item for group in self.stream(offsets, n_samples, rng) for item in group]

    def stream(self, offsets: list[int], n_samples: int, rng: np.random.Generator) -> Iterator[list[ProbeItem]]:
        """The items of one content at a time (all its offsets and variants), in content order, so
        a sweep of long prompts holds a batch of contents, never the whole sweep. The same rng
        state gives the same items as ``items``."""
        if type(self).items is Probe.items:
            raise NotImplementedError(f"{type(self).__name__} defines neither items nor stream")
        by_content: dict = {}
        for item in self.items(offsets, n_samples, rng):
            by_content.setdefault(item.content_id, []).append(item)
        yield from by_content.values()

    def spec(self) -> dict:
        """JSON-able description of the probe's parameters (for spec.json)."""
        raise NotImplementedError

    def default_samples(self) -> int:
        """Content samples when the caller does not say (a probe with a fixed set: all of them)."""
        return 50
