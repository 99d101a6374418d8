"""The phase statistics measured in log-probability instead of correctness.

At the ceiling (every answer right) or the floor, accuracy cannot show a phase effect, but the
model's confidence still can: ``log_score`` runs the same two stages as accuracy (column effects
within contents, then the data-chosen, checked drift trend + phase effects, wild cluster
bootstrap by content, the period test) on the log-prob **margin** of each record (log p(right)
- the largest log p of the other candidates; the log p of the right answer when the probe names
no other candidate). Units: nats. The per-phase means carry intervals clustered by content.
"""

from __future__ import annotations

import numpy as np

from phasescope.analysis.intervals import cluster_mean
from phasescope.analysis.offset_effects import MIN_CONTENTS, fit_offset_effects
from phasescope.analysis.period import detect_period
from phasescope.analysis.phase_effects import PhaseEffects, fit_phase_effects
from phasescope.analysis.records import RecordArrays


def log_score(r: RecordArrays, rng: np.random.Generator, n_resamples: int, trend_degree: int | None = None):
    """metrics.json's ``log_score`` section, or None when no record carries a log-prob."""
    outcome, values = ("margin", r.margin) if np.isfinite(r.margin).any() else ("logprob", r.logprob)
    if not np.isfinite(values).any():
        return None
    scored = r.with_outcome(values)
    fx = fit_offset_effects(scored.cells(continuous=True), rng, n_resamples)
    effects = fit_phase_effects(fx, fixed_degree=trend_degree)
    gap_ci = effects.gap_ci
    return {
        "outcome": outcome,
        "unit": "nats",
        "n_records": int(len(scored.correct)),
        "phases": [_phase_row(scored, effects, p) for p in range(r.step)],
        "gap": effects.gap,
        "gap_ci": None if gap_ci is None else [float(v) for v in gap_ci],
        "gap_p_value": effects.gap_p,
        "homogeneity_p_value": effects.homogeneity_p,
        "trend_degree": None if effects.trend is None else effects.trend.degree,
        "period": detect_period(fx, r.step, effects.trend),
        "note": effects.note,
    }


def _phase_row(scored: RecordArrays, effects: PhaseEffects, phase: int) -> dict:
    mask = scored.phase == phase
    sums = np.bincount(scored.content[mask], weights=scored.correct[mask], minlength=scored.n_contents)
    totals = np.bincount(scored.content[mask], minlength=scored.n_contents)
    low, high = cluster_mean(sums, totals, min_units=MIN_CONTENTS)
    row = {
        "phase": phase,
        "n_contents": int((totals > 0).sum()),
        "mean": float(scored.correct[mask].mean()) if mask.any() else None,
        "ci": None if low is None else [low, high],
        "effect": None,
        "effect_ci": None,
    }
    if effects.effects is not None and phase in effects.phases:
        i = effects.phases.index(phase)
        row["effect"] = float(effects.effects[i])
        if effects.effect_ci is not None:
            row["effect_ci"] = [float(v) for v in effects.effect_ci[i]]
    return row
