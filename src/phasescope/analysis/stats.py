"""Statistics on sweep records only (DESIGN.md §3): never imports a model or a backend.

``analyze_records`` puts together: per-phase raw accuracy (Wilson intervals, log-probs,
margins); phase effects and the gap with the drift over offsets modelled
(``phase_effects``); the period over offsets (``period``); same-window vs split-window at
equal value phase (``windows``); the mean probability of each candidate per phase
(``candidates``). A statistic without data is ``None`` ("not estimable"),
never a NaN.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import norm

from phasescope.analysis.candidates import candidate_probabilities
from phasescope.analysis.flips import phase_flips
from phasescope.analysis.period import detect_period
from phasescope.analysis.phase_effects import MAX_TREND_DEGREE, PhaseEffects, fit_phase_effects
from phasescope.analysis.records import RecordArrays
from phasescope.analysis.windows import window_contrast

MODEL = (
    "linear probability model: content fixed effects + Legendre polynomial of the offset (the drift) + phase "
    "effects; wild cluster bootstrap by content (Webb weights), CR1-studentized; gap interval from simultaneous "
    "intervals of all pairwise phase contrasts"
)


def wilson(successes: int, n: int, level: float = 0.95) -> tuple[float, float] | tuple[None, None]:
    """Wilson score interval for a binomial proportion (None, None without data)."""
    if n == 0:
        return (None, None)
    z = norm.ppf(0.5 + level / 2)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def _mean(x: np.ndarray) -> float | None:
    x = x[~np.isnan(x)]
    return float(x.mean()) if len(x) else None


def per_phase(r: RecordArrays, fx: PhaseEffects) -> list[dict]:
    overall = float(r.correct.mean())
    rows = []
    for p in range(r.step):
        mask = r.phase == p
        y = r.correct[mask]
        low, high = wilson(int(y.sum()), len(y))
        row = {
            "phase": p,
            "n": int(len(y)),
            "accuracy": float(y.mean()) if len(y) else None,
            "ci_low": low,
            "ci_high": high,
            "mean_logprob": _mean(r.logprob[mask]),
            "mean_margin": _mean(r.margin[mask]),
            "adjusted_accuracy": None,
            "effect_pp": None,
            "effect_ci_pp": None,
        }
        if p in fx.phases and not np.isnan(fx.effects).any():
            i = fx.phases.index(p)
            row["adjusted_accuracy"] = overall + float(fx.effects[i])
            row["effect_pp"] = 100 * float(fx.effects[i])
            if fx.effect_ci is not None:
                row["effect_ci_pp"] = [100 * float(v) for v in fx.effect_ci[i]]
        rows.append(row)
    return rows


def period_of(
    offsets: np.ndarray,
    accuracy: np.ndarray,
    phase_by_offset: list,
    rng: np.random.Generator,
    n_resamples: int,
    degree: int,
) -> dict:
    """Period over offsets [D] of accuracy [D], when every offset holds one phase."""
    if any(p is None for p in phase_by_offset):
        return {
            "detected": None,
            "p_value": None,
            "explained": {},
            "note": "records at one offset have different phases (the probe does not align every content's anchor); "
            "period detection needs one phase per offset",
        }
    return detect_period(offsets, accuracy, rng, n_resamples, max_degree=degree)


def _ceiling_note(r: RecordArrays) -> str | None:
    if r.correct.min() != r.correct.max():
        return None
    word = "right" if r.correct[0] else "wrong"
    return (
        f"every record is {word}: at this {'ceiling' if word == 'right' else 'floor'} no phase effect could show; "
        "compare mean log p per phase, or use a harder task"
    )


def _join(*notes: str | None) -> str | None:
    return "; ".join(n for n in notes if n) or None


def analyze_records(
    records: list[dict], seed: int = 0, n_resamples: int = 2000, trend_degree: int = MAX_TREND_DEGREE
) -> dict:
    """metrics.json content from records alone."""
    r = RecordArrays.from_records(records)
    return analyze_arrays(r, seed, n_resamples, trend_degree)


def analyze_arrays(
    r: RecordArrays, seed: int = 0, n_resamples: int = 2000, trend_degree: int = MAX_TREND_DEGREE
) -> dict:
    rng = np.random.default_rng(seed)
    fx = fit_phase_effects(r.cells(), rng, n_resamples, trend_degree, step=r.step)
    phases = per_phase(r, fx)
    raw = [row["accuracy"] for row in phases if row["accuracy"] is not None]
    offsets, by_offset = r.offset_means()
    phase_by_offset = r.phase_by_offset()
    return {
        "step": r.step,
        "n_records": int(len(r.correct)),
        "n_contents": r.n_contents,
        "offsets": [int(d) for d in offsets],
        "overall_accuracy": float(r.correct.mean()),
        "phases": phases,
        "model": MODEL,
        "trend_degree": fx.trend_degree,
        "gap_pp": None if fx.gap is None else 100 * fx.gap,
        "gap_ci_pp": None if fx.gap_ci is None else [100 * v for v in fx.gap_ci],
        "gap_p_value": fx.gap_p,
        "homogeneity_p_value": fx.homogeneity_p,
        "gap_raw_pp": 100 * (max(raw) - min(raw)) if len(raw) >= 2 else None,
        "inference_note": _join(fx.note, _ceiling_note(r)),
        "period": period_of(offsets, by_offset, phase_by_offset, rng, n_resamples, trend_degree),
        "accuracy_by_offset": [float(x) for x in by_offset],
        "phase_by_offset": phase_by_offset,
        "windows": window_contrast(r, rng, n_resamples),
        "flips": phase_flips(r),
        "candidate_probabilities": candidate_probabilities(r),
    }
