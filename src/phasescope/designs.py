"""The sweep designs: where each puts the needle and the prompt end at offset ``d`` (docs/design.md, 'Where
the phase lives'): the one place the kv-retrieval probes (ids and text) read a design from.

Three phases can carry an effect: the needle's (its value's first token), the prompt end's (the
first answer position, i.e. the prompt's length: where a serving stack's last, partial window
ends) and their distance's. Each design moves some of them with the offset::

    design        needle moves by   prompt end moves by            moves              holds
    shift-needle  d                 0                              needle, distance   end
    pad-prefix    d (so does all)   d                              needle, end        distance
    shift-end     0                 d (filler before the question) end, distance      needle
    crossed       d                 e(d): a balanced draw          all three          --

``crossed``: at each needle phase, a content's offsets get end shifts that run through every
residue 0..s-1 in a random order (then again), plus a per-content lead in 0..s-1, so every
content is seen at every (needle phase, prompt-end phase) pair once its offsets span s windows
of the step, and the end shift is independent of the offset within a content (a drift along
the offsets cannot pass for a prompt-end effect).
"""

from __future__ import annotations

import math

import numpy as np

DESIGNS = ("shift-needle", "pad-prefix", "shift-end", "crossed")
# Which of the three phases (the needle's, the prompt end's, their distance's: docs/design.md,
# 'Where the phase lives') each design moves with the offset; the others it holds. Two moved
# together are tied: the design cannot tell which of them an effect follows.
DESIGN_MOVES = {
    "shift-needle": ("needle", "distance"),  # the needle slides toward the question; the prompt end stays
    "pad-prefix": ("needle", "end"),  # everything after BOS moves; the needle-to-question distance stays
    "shift-end": ("end", "distance"),  # filler between needle and question; the needle stays
    "crossed": ("needle", "end", "distance"),  # needle moves, the end by its own draw: all three separable
}
DESIGN_HELP = (
    "Placement: shift-needle (the needle moves, length fixed), pad-prefix (d filler tokens after BOS: "
    "everything moves), shift-end (d filler tokens before the question: the prompt end moves, the needle "
    "stays) or crossed (the needle moves by d and the prompt end by its own balanced draw of 0..2s-2 tokens, "
    "so every content is seen at every pair of needle phase and prompt-end phase)."
)


def needle_moves(design: str) -> bool:
    """The needle moves by the offset relative to the question (so it needs that much room)."""
    return design in ("shift-needle", "crossed")


def prefix_padded(design: str) -> bool:
    """Filler goes in after BOS: everything moves by the offset."""
    return design == "pad-prefix"


def most_end_filler(design: str, span: int, step: int) -> int:
    """The most filler tokens a design puts before the question (room to leave for them)."""
    if design == "shift-end":
        return span
    return 2 * max(step, 1) - 2 if design == "crossed" else 0


def end_shifts(design: str, offsets: list[int], step: int, rng: np.random.Generator) -> dict[int, int]:
    """Filler tokens before the question at each offset. Draws from ``rng`` only for ``crossed``
    (the other designs' contents are the same as before the crossed design existed)."""
    if design == "shift-end":
        return {d: d for d in offsets}
    if design != "crossed" or step <= 1:
        return {d: 0 for d in offsets}
    lead = int(rng.integers(0, step))
    shifts = {}
    for phase in range(step):
        at = [d for d in offsets if d % step == phase]
        rounds = math.ceil(len(at) / step)
        draws = np.concatenate([rng.permutation(step) for _ in range(rounds)])[: len(at)] if at else []
        shifts.update({d: lead + int(e) for d, e in zip(at, draws, strict=True)})
    return shifts


def describe(design: str) -> str:
    """'moves the needle's and the distance's phase; holds the prompt end's' for a design."""
    names = {"needle": "the needle's", "end": "the prompt end's", "distance": "the distance's"}
    moved = [names[f] for f in DESIGN_MOVES[design]]
    held = [names[f] for f in names if f not in DESIGN_MOVES[design]]
    if held:
        return f"moves {' and '.join(moved)} phase together; holds {held[0]}"
    return f"moves {', '.join(moved[:-1])} and {moved[-1]} phase independently"
