"""Probe base class: token-exact items that place the same content at many offsets.

A probe builds, for each content sample and each offset, one ``ProbeItem``: the prompt ids
the model reads, the candidate answers (token ids), which one is right, and every position
that matters (DESIGN.md §2: positions index the exact id sequence, BOS included). Probes
check their own token exactness and raise ``ProbeError`` before any scoring starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np


class ProbeError(ValueError):
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


class Probe:
    name: ClassVar[str]
    summary: ClassVar[str]
    has_keys: ClassVar[bool] = False

    def items(self, offsets: list[int], n_samples: int, rng: np.random.Generator) -> list[ProbeItem]:
        """Every content sample at every offset (paired design)."""
        raise NotImplementedError

    def spec(self) -> dict:
        """JSON-able description of the probe's parameters (for spec.json)."""
        raise NotImplementedError
