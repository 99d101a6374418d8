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
residue 0..s-1 in a random order (then again), each in a block of s drawn in turn from the P / s
blocks of the longest period P a factor is tested at (``phases.longest_period``: 8 at step 4), plus
a per-content lead in 0..P-1. So every content is seen at every (needle phase, prompt-end phase)
pair once its offsets span s windows of the step, the prompt end moves over every residue mod P
(a fault at prompt length ≡ 5 mod 8 is seen as such, not as ≡ 1 mod 4), and the end shift is
independent of the offset within a content (a drift along the offsets cannot pass for a
prompt-end effect).
"""

from __future__ import annotations

import math

import numpy as np

from phasescope.phases import FACTORS, longest_period

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
    "Placement: shift-needle (the needle moves), pad-prefix (everything moves), shift-end (the prompt end "
    "moves) or crossed (the needle and the prompt end move apart, so the factor tests can tell which one an "
    "effect follows). docs/sweeps.md, 'Where the phase lives'."
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
    return 2 * longest_period(step) - 2 if design == "crossed" and step > 1 else 0


def end_shifts(design: str, offsets: list[int], step: int, rng: np.random.Generator) -> dict[int, int]:
    """Filler tokens before the question at each offset. Draws from ``rng`` only for ``crossed``
    (the other designs' contents are the same as before the crossed design existed)."""
    if design == "shift-end":
        return {d: d for d in offsets}
    if design != "crossed" or step <= 1:
        return {d: 0 for d in offsets}
    period = longest_period(step)
    blocks = period // step
    lead = int(rng.integers(0, period))
    shifts = {}
    for phase in range(step):
        at = [d for d in offsets if d % step == phase]
        if not at:
            continue
        residues = np.concatenate([rng.permutation(step) for _ in range(math.ceil(len(at) / step))])
        block = np.concatenate([rng.permutation(blocks) for _ in range(math.ceil(len(at) / blocks))])
        shifts.update({d: lead + int(e) + step * int(b) for d, e, b in zip(at, residues, block, strict=False)})
    return shifts


def describe(design: str) -> str:
    """'moves the needle's and the distance's phase; holds the prompt end's' for a design."""
    names = {name: f.words.removesuffix(" phase") for name, f in FACTORS.items()}
    moved = [names[f] for f in DESIGN_MOVES[design]]
    held = [names[f] for f in names if f not in DESIGN_MOVES[design]]
    if held:
        return f"moves {' and '.join(moved)} phase together; holds {held[0]}"
    return f"moves {', '.join(moved[:-1])} and {moved[-1]} phase independently"
