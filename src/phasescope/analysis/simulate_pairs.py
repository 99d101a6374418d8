"""Simulated paired runs with a known truth: calibration and power of the departure tests
(``analysis/departures.py``; docs/sweeps.md, 'Paired comparison'; ``experiments/paired_calibration.py``).

A (the reference) is a simulated sweep of any design (``simulate_factors``: drift, uneven
difficulty, planted phase effects of its own). B is A with a fault:

* ``break``: B is wrong on a share ``rate`` of the records where A is right (only where the
  fault's factor is at its residue modulo its period, or anywhere with ``where=None``);
* ``flip``: B answers the opposite of A on a share ``rate`` of the records there (both directions,
  which cancel in B - A);
* ``noise``: a healthy but nondeterministic pair: A and B each flip the simulated answer with
  probability ``noise``, independently, everywhere (A and B exchangeable: what the tests must not
  call a departure).

Shape legend: N records.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from phasescope.analysis.departures import ALPHA, Pairs, departure_statistics
from phasescope.analysis.records import RecordArrays
from phasescope.analysis.simulate_factors import FactorScenario, simulate_factors
from phasescope.phases import FACTORS, candidate_periods


@dataclass(frozen=True)
class PairScenario:
    reference: FactorScenario = field(default_factory=lambda: FactorScenario(drift_pp=40.0))
    mode: str = "break"  # "break" or "flip"
    rate: float = 0.0  # the share of eligible records the fault hits
    where: tuple[str, int, int] | None = None  # (factor, period, residue); None: anywhere
    noise: float = 0.0  # a healthy, nondeterministic B: every record flipped with this probability


def pairs_from_arrays(r: RecordArrays, b_correct: np.ndarray) -> Pairs:
    """``Pairs`` of simulated records (their anchor and answer positions) and B's answers."""
    positions = {name: f.position(r.anchor_pos, r.answer_pos, r.align) for name, f in FACTORS.items()}
    nan = np.full(len(r.correct), np.nan)
    return Pairs(
        step=r.step,
        align=r.align,
        content=r.content,
        band=np.zeros(len(r.correct), dtype=np.int64),
        bands=[None],
        positions=positions,
        periods=candidate_periods(r.step),
        a_correct=r.correct.astype(bool),
        b_correct=np.asarray(b_correct, dtype=bool),
        a_logprob=nan,
        b_logprob=nan,
        answer_pos=r.answer_pos,
        offset=r.offset,
    )


def simulate_pairs(s: PairScenario, rng: np.random.Generator) -> Pairs:
    r = simulate_factors(s.reference, rng)
    a = r.correct.astype(bool)
    if s.noise:  # both runs are draws of one nondeterministic system
        a = a ^ (rng.random(len(a)) < s.noise)
        latent, r.correct = r.correct.astype(bool), a.astype(float)
    eligible = np.ones(len(a), dtype=bool)
    if s.where is not None:
        factor, period, residue = s.where
        position = FACTORS[factor].position(r.anchor_pos, r.answer_pos, r.align)
        eligible = position % period == residue
    hit = eligible & (rng.random(len(a)) < s.rate)
    b = a.copy()
    if s.mode == "break":
        b[hit] = False
    else:
        b[hit] = ~a[hit]
    if s.noise:
        b = latent ^ (rng.random(len(a)) < s.noise)
    return pairs_from_arrays(r, b)


def calibrate_pairs(s: PairScenario, n_sims: int, seed: int = 0, n_permutations: int = 500) -> dict:
    """Rates over ``n_sims`` paired runs: B declared to depart (the family's p < alpha), some factor
    claimed, the fault's factor claimed (``found``), its period named (``period``), a factor claimed
    that has no fault (``wrong``)."""
    departs = claimed = found = period = wrong = 0
    truth = None if s.where is None else s.where[0]
    for i in range(n_sims):
        result = departure_statistics(
            simulate_pairs(s, np.random.default_rng([seed, i])), seed=i, n_permutations=n_permutations
        )
        departs += result["p_value"] < ALPHA
        names, periods = set(), set()
        for kind, entry in result["kinds"].items():
            test = entry["test"] or {}
            if test.get("p_value") is not None and result["adjusted_p"].get(kind, 1.0) < ALPHA:
                names |= set(test["factor"])
                if truth in test["factor"]:
                    periods.add(test["period"])
        period += s.where is not None and periods == {s.where[1]}
        claimed += bool(names)
        found += truth is not None and truth in names
        wrong += bool(names - {truth})
    return {
        k: v / n_sims
        for k, v in dict(departs=departs, claimed=claimed, found=found, period=period, wrong=wrong).items()
    }


__all__ = ["PairScenario", "calibrate_pairs", "pairs_from_arrays", "simulate_pairs"]
