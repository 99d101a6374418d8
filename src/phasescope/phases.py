"""The factors a compression boundary can act on, declared once (docs/design.md, 'Where the phase
lives'): each factor's name, its words, how a record's position for it is computed, and what it
is made of. The designs, the statistics by factor, the paired comparison, the verdict, the
figures and the simulations read this table; a new factor is one entry here.

A factor's **position** is a token count whose residue modulo a period is the factor's phase:

    factor     position                          phase at period P      words
    needle     anchor_pos - align                (anchor - a) mod P     needle phase r
    end        answer_pos - align (the prompt's  (L - a) mod P          prompt length ≡ r + a mod P
               length L, or the length of the
               request that carried an answer)
    distance   answer_pos - anchor_pos           (L - anchor) mod P     needle-to-end distance ≡ r mod P

The distance is the end minus the needle, so any two give the third (``made_of``). The periods a
factor is tested at (``candidate_periods``) are not only the step: the faults reported in served
DeepSeek-V4 are keyed on the step (prompt length ≡ 3 mod 4), a divisor of it, and longer blocks
(V4.1's candidate filter works in 8-token blocks), so every factor is read at the step's
divisors, the step, twice the step, and 8 where 8 is a multiple of the step. Each candidate
divides the longest (``longest_period``), which a design must move every factor over.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Factor:
    """One factor: ``name`` as records and claims spell it (``factor:end``), ``words`` as sentences
    say it, ``short`` for a table's column, ``made_of`` the factors it is a difference of (end
    minus needle), ``length`` whether its phase is a prompt length (a serving stack's last window)."""

    name: str
    words: str
    short: str
    made_of: tuple[str, ...] = ()
    length: bool = False

    def position(self, anchor_pos, answer_pos, align):
        """The factor's position for arrays (or ints) of anchor and answer positions."""
        if self.name == "needle":
            return anchor_pos - align
        if self.name == "end":
            return answer_pos - align
        return answer_pos - anchor_pos

    def describe(self, residue: int, period: int, step: int, align: int = 0) -> str:
        """'prompt length ≡ 5 mod 8', 'needle phase 3' (at the step), 'needle phase 5 mod 8',
        'needle-to-end distance ≡ 1 mod 4'."""
        if self.name == "end":
            return f"prompt length ≡ {(residue + align) % period} mod {period}"
        if self.name == "distance":
            return f"needle-to-end distance ≡ {residue} mod {period}"
        return f"needle phase {residue}" if period == step else f"needle phase {residue} mod {period}"


FACTORS: dict[str, Factor] = {
    f.name: f
    for f in (
        Factor("needle", "the needle's phase", "needle"),
        Factor("end", "the prompt end's phase", "prompt end", length=True),
        Factor("distance", "the distance's phase", "distance", made_of=("end", "needle")),
    )
}
NAMES = tuple(FACTORS)


def words(members: list[str] | tuple[str, ...]) -> str:
    """'the needle's phase or the distance's phase' for a group of tied factors."""
    return " or ".join(FACTORS[f].words for f in members)


def candidate_periods(step: int) -> list[int]:
    """The periods every factor is tested at: the step's divisors above 1, the step, twice the
    step, and 8 where it is a multiple of the step (V4.1's 8-token candidate blocks at step 2).
    Each divides the last (``longest_period``). Step 1 (a model that is not compressed, phases
    only labelled): [2, 8], so a stack's own length fault still has a period to be found at."""
    step = max(int(step), 1)
    periods = {p for p in range(2, step + 1) if step % p == 0} | {2 * step}
    if 8 % step == 0:
        periods.add(8)
    return sorted(periods)


def longest_period(step: int) -> int:
    return candidate_periods(step)[-1]


def positions(anchor_pos: np.ndarray, answer_pos: np.ndarray, align: int) -> dict[str, np.ndarray]:
    """[N] each factor's position, for records with anchor and answer positions."""
    return {name: f.position(anchor_pos, answer_pos, align) for name, f in FACTORS.items()}


def lengths_words(low: int, high: int, bands: list[int] | None = None) -> str:
    """The prompt lengths a run tested, as every verdict states them: 'prompts of 1,017 to 1,044
    tokens', 'prompts of 128 tokens', or with length bands 'prompts of 1,017 to 16,380 tokens in 3
    bands (1,024, 4,096 and 16,384)'."""
    text = f"prompts of {low:,} tokens" if low == high else f"prompts of {low:,} to {high:,} tokens"
    if bands and len(bands) > 1:
        listed = [f"{b:,}" for b in bands]
        text += f" in {len(bands)} bands ({', '.join(listed[:-1])} and {listed[-1]})"
    return text


__all__ = ["FACTORS", "NAMES", "Factor", "candidate_periods", "lengths_words", "longest_period", "positions", "words"]
