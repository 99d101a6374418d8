"""Simulated sweeps of every design with planted effects of each factor (the needle's phase, the
prompt end's, their distance's): calibration and power of the statistics by factor
(``analysis/factors.py``; docs/sweeps.md, 'Statistics by factor'; ``experiments/calibration.py``).

For C contents and the offsets 0..D-1, the design puts the needle's value at ``N = N0 + d`` (or
``N0``) and the prompt end at ``A = A0_c + ...`` exactly as ``phasescope.designs`` does; each
content's prompt starts at its own length ``A0_c`` (uniform over a span, as a text haystack's) or
at one length for all (ids). The probability that content c is answered right::

    p = mean + u_c + drift(d) + needle[N mod P] + end[A mod P] + distance[(A - N) mod P]

clipped to [0.01, 0.99]; ``u_c`` uniform in ±difficulty, ``drift`` linear over the offsets
(``drift_pp``, falling: the needle nears the question), a planted effect is ``-effect_pp`` at one
residue of its factor modulo ``period`` (P, default the step; ``worst``, default P - 1). One record
per (content, offset).

Shape legend: C contents, D offsets, N records.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from phasescope.analysis.records import RecordArrays
from phasescope.designs import end_shifts, needle_moves, prefix_padded

N0 = 40  # the needle's value at offset 0
START_SPAN = 48  # prompt lengths at offset 0: A0 + 0..START_SPAN-1 (a multiple of every step tried)


@dataclass(frozen=True)
class FactorScenario:
    design: str = "crossed"
    step: int = 4
    n_contents: int = 60
    n_offsets: int = 24
    mean: float = 0.6
    difficulty: float = 0.25
    drift_pp: float = 30.0
    needle_pp: float = 0.0
    end_pp: float = 0.0
    distance_pp: float = 0.0
    worst: int | None = None  # the residue a planted effect lowers (default: the boundary phase, P - 1)
    period: int | None = None  # P: a planted effect repeats every P tokens (default: the step)
    end_start: str = "uniform"  # "uniform": each content's prompt has its own length; "one": all alike


def simulate_factors(s: FactorScenario, rng: np.random.Generator) -> RecordArrays:
    offsets = list(range(s.n_offsets))
    period = s.period or s.step
    worst = period - 1 if s.worst is None else s.worst
    content, offset, needle, end, correct = [], [], [], [], []
    drift = -s.drift_pp / 100 * np.linspace(-0.5, 0.5, s.n_offsets)
    for c in range(s.n_contents):
        start = 100 + (int(rng.integers(0, START_SPAN)) if s.end_start == "uniform" else 0)
        shifts = end_shifts(s.design, offsets, s.step, rng)
        u = rng.uniform(-s.difficulty, s.difficulty)
        for d in offsets:
            n = N0 + (d if needle_moves(s.design) or prefix_padded(s.design) else 0)
            a = start + (d if prefix_padded(s.design) else 0) + shifts[d]
            p = s.mean + u + drift[d]
            p -= s.needle_pp / 100 * (n % period == worst)
            p -= s.end_pp / 100 * (a % period == worst)
            p -= s.distance_pp / 100 * ((a - n) % period == worst)
            content.append(c)
            offset.append(d)
            needle.append(n)
            end.append(a)
            correct.append(rng.random() < np.clip(p, 0.01, 0.99))
    anchor, answer = np.array(needle), np.array(end)
    r = RecordArrays.from_arrays(s.step, content, offset, anchor % s.step, correct)
    return replace(r, end_phase=answer % s.step, answer_pos=answer, anchor_pos=anchor, align=0)


def factor_claims(r: RecordArrays, seed: int, n_resamples: int) -> set[str]:
    """The factors a sweep's verdict claims (``factor:NAME`` under the verdict's Holm adjustment)."""
    return set(_claimed(r, seed, n_resamples))


def _claimed(r: RecordArrays, seed: int, n_resamples: int) -> dict[str, int | None]:
    """Each factor the verdict claims -> the period its test names."""
    from phasescope.analysis.stats import analyze_arrays

    m = analyze_arrays(r, seed=seed, n_resamples=n_resamples)
    periods = {t["name"]: t.get("period") for t in (m.get("factors") or {}).get("tests", [])}
    claimed = {}
    for name in m["verdict"]["claims"]:
        if name.startswith("factor:"):
            group = name.removeprefix("factor:")
            claimed |= {f: periods.get(group) for f in group.split("+")}
    return claimed


def calibrate_factors(s: FactorScenario, n_sims: int, seed: int = 0, n_resamples: int = 500) -> dict:
    """Rates over ``n_sims`` sweeps: any factor claimed, the planted factor(s) claimed (``found``),
    and each named at the planted period (``period``), another claimed (``wrong``)."""
    planted = {f for f, pp in (("needle", s.needle_pp), ("end", s.end_pp), ("distance", s.distance_pp)) if pp}
    truth = s.period or s.step
    any_claim = found = period = wrong = 0
    for i in range(n_sims):
        claimed = _claimed(simulate_factors(s, np.random.default_rng([seed, i])), i, n_resamples)
        any_claim += bool(claimed)
        found += bool(planted) and planted <= set(claimed)
        period += bool(planted) and all(claimed.get(f) == truth for f in planted)
        wrong += bool(set(claimed) - planted)
    return {k: v / n_sims for k, v in dict(any=any_claim, found=found, period=period, wrong=wrong).items()} | {
        "n": n_sims
    }
