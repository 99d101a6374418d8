"""Phase effects with the drift over offsets modelled (DESIGN.md §3 "confounds first").

Model, fitted to the records (a linear probability model; contents are clusters)::

    correct = alpha[content] + sum_j b_j * P_j(x) + gamma[phase] + noise

``alpha``: one intercept per content (uneven difficulty); ``P_j``: Legendre polynomials of
the offset scaled to [-1, 1], degree 1..``trend_degree`` (the drift: shift-needle moves the
needle toward the query, pad-prefix lengthens the prompt); ``gamma``: the phase effects,
reported as deviations from their mean (they sum to zero), in percentage points.

Why this model: effects come out in percentage points, the unit of the gap; it has no
separation problem at 0 % or 100 % accuracy (logistic fixed-effects models do); with content
fixed effects it is fitted in closed form, so the bootstrap is cheap. A phase effect is
estimated from the contrast between offsets of different phases after the polynomial has
absorbed everything smooth: a linear drift over 24 offsets no longer reads as a gap.

Inference (``cluster_ols``): wild cluster bootstrap by content. The gap is the largest
pairwise phase contrast; its interval comes from simultaneous intervals for all contrasts
(bootstrap distribution of the largest |t|): ``[max(0, max(|d| - c·se)), max(|d| + c·se)]``.
It contains the true gap whenever every contrast interval covers its contrast (>= 95 %), and
it can contain zero. The gap p-value is the same max-|t| test, so the interval excludes zero
exactly when p < 0.05. Homogeneity: the cluster-robust Wald statistic of all phase effects,
bootstrapped the same way.

Shape legend: M cells, K regressors, E estimable phases, Q = E(E-1)/2 phase pairs, B draws.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from phasescope.analysis.cluster_ols import bootstrap_p, critical_value, fit, full_rank, studentized, within
from phasescope.analysis.records import Cells

MIN_CONTENTS = 10  # below this, cluster-bootstrap intervals and p-values are not reported
MAX_TREND_DEGREE = 6


def trend_degree(n_offsets: int, shortest_period: int, cap: int = MAX_TREND_DEGREE) -> int:
    """Degree of the drift polynomial: one degree per ``shortest_period`` offsets, so it stays
    smoother than the shortest periodic pattern it must not absorb (24 offsets, step 4:
    degree 6; step 8: 3), at least linear, at most ``cap`` (0: the drift is ignored).

    Why so flexible: a bump a cubic cannot follow leaks into the phase effects and pushes the
    false-positive rate above alpha; a period-4 pattern is far too fast for a degree-6
    polynomial over 24 offsets to absorb (both measured: experiments/calibration.py)."""
    if n_offsets < 3:
        return 0
    return max(0, min(cap, max(1, n_offsets // shortest_period)))


def legendre_trend(offsets: np.ndarray, degree: int, lo: float, hi: float) -> np.ndarray:
    """[M, degree] Legendre polynomials 1..degree of the offset scaled to [-1, 1]."""
    x = 2 * (offsets - lo) / (hi - lo) - 1 if hi > lo else np.zeros(len(offsets))
    return np.polynomial.legendre.legvander(x, degree)[:, 1:]


@dataclass
class PhaseEffects:
    phases: list[int]  # estimable phases, in order
    effects: np.ndarray  # [E] deviation of each phase from the mean over phases (accuracy units)
    effect_ci: np.ndarray | None  # [E,2] 95% interval of each effect (one at a time)
    gap: float | None  # largest minus smallest effect
    gap_ci: tuple[float, float] | None
    gap_p: float | None
    homogeneity_p: float | None
    trend_degree: int
    note: str | None = None


def _design(cells: Cells, phases: list[int], degree: int) -> np.ndarray:
    """[M,K]: dummies of phases[1:] (phases[0] is the reference), then the trend polynomial."""
    dummies = (cells.phase[:, None] == np.array(phases[1:])[None]).astype(float)
    trend = legendre_trend(cells.offset.astype(float), degree, cells.offset.min(), cells.offset.max())
    return np.concatenate([dummies, trend], axis=1)


def _contrasts(n_phases: int, n_cols: int) -> tuple[np.ndarray, np.ndarray]:
    """Effects [E,K] (sum-to-zero phase effects) and pairs [Q,K] (gamma_p - gamma_q, p < q)."""
    gamma = np.zeros((n_phases, n_cols))  # gamma of each phase in terms of beta; phase 0 is 0
    gamma[1:, : n_phases - 1] = np.eye(n_phases - 1)
    effects = gamma - gamma.mean(axis=0)
    pairs = np.array([gamma[p] - gamma[q] for p in range(n_phases) for q in range(p + 1, n_phases)])
    return effects, pairs


def fit_phase_effects(
    cells: Cells,
    rng: np.random.Generator,
    n_boot: int = 2000,
    max_degree: int = MAX_TREND_DEGREE,
    level: float = 0.95,
    step: int | None = None,
) -> PhaseEffects:
    """``step``: the period the phase effects repeat with (default: the number of phases seen)."""
    phases = sorted(int(p) for p in np.unique(cells.phase))
    degree = trend_degree(len(np.unique(cells.offset)), step or max(len(phases), 2), max_degree)
    if len(phases) < 2:
        return PhaseEffects(phases, np.zeros(len(phases)), None, None, None, None, None, degree, _one_phase(phases))
    y = within(cells.accuracy, cells.content, cells.n, cells.n_contents)
    while True:
        x = within(_design(cells, phases, degree), cells.content, cells.n, cells.n_contents)
        if full_rank(x, cells.n) or degree == 0:
            break
        degree -= 1  # offsets too few for this trend next to the phases
    if not full_rank(x, cells.n):
        note = "phase effects are not estimable: within each content, the phases are confounded with each other"
        return PhaseEffects(phases, np.full(len(phases), np.nan), None, None, None, None, None, degree, note)
    model = fit(x, y, cells.n, cells.content, cells.n_contents)
    effect_map, pair_map = _contrasts(len(phases), x.shape[1])
    effects = effect_map @ model.beta
    gap = float(effects.max() - effects.min())
    if cells.n_contents < MIN_CONTENTS:
        note = (
            f"only {cells.n_contents} content samples: intervals and p-values need at least {MIN_CONTENTS} "
            "(raise --samples); the numbers above describe these contents only"
        )
        return PhaseEffects(phases, effects, None, gap, None, None, None, degree, note)
    return _bootstrap(model, effects, effect_map, pair_map, gap, phases, degree, rng, n_boot, level)


def _bootstrap(model, effects, effect_map, pair_map, gap, phases, degree, rng, n_boot, level) -> PhaseEffects:
    cov = model.covariance
    pair_t = np.abs(studentized(pair_map, model.beta, cov))
    n_gamma = len(phases) - 1
    wald = _wald(model.beta[:n_gamma], cov[:n_gamma, :n_gamma])
    max_t, effect_t, wald_null = [], [], []
    for delta, cov_b in model.draws(rng, n_boot):
        max_t.append(np.abs(studentized(pair_map, delta, cov_b)).max(axis=-1))
        effect_t.append(np.abs(studentized(effect_map, delta, cov_b)))
        wald_null.append(_wald(delta[:, :n_gamma], cov_b[:, :n_gamma, :n_gamma]))
    max_t, effect_t, wald_null = np.concatenate(max_t), np.concatenate(effect_t), np.concatenate(wald_null)
    pair_se = np.sqrt(np.maximum(np.einsum("qk,kl,ql->q", pair_map, cov, pair_map), 0.0))
    effect_se = np.sqrt(np.maximum(np.einsum("ek,kl,el->e", effect_map, cov, effect_map), 0.0))
    crit = critical_value(max_t, level)
    size = np.abs(pair_map @ model.beta)
    gap_ci = (float(max(0.0, (size - crit * pair_se).max())), float((size + crit * pair_se).max()))
    effect_crit = critical_value(effect_t, level)
    effect_ci = np.stack([effects - effect_crit * effect_se, effects + effect_crit * effect_se], axis=1)
    return PhaseEffects(
        phases=phases,
        effects=effects,
        effect_ci=effect_ci,
        gap=gap,
        gap_ci=gap_ci,
        gap_p=bootstrap_p(max_t, float(pair_t.max())),
        homogeneity_p=bootstrap_p(wald_null, float(wald)),
        trend_degree=degree,
    )


def _wald(gamma: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """gammaᵀ cov⁺ gamma for [...,G] and [...,G,G] (pseudo-inverse: a phase with no spread adds 0)."""
    inv = np.linalg.pinv(cov, hermitian=True)
    return np.einsum("...g,...gh,...h->...", gamma, inv, gamma)


def _one_phase(phases: list[int]) -> str:
    seen = ", ".join(map(str, phases)) or "none"
    return (
        f"phases observed: {seen}; phase effects need records at two phases or more "
        "(offsets must cover every phase; e.g. --offsets 0:24)"
    )
