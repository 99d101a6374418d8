"""Phase effects, the gap and homogeneity with the drift over offsets modelled (docs/design.md,
'Phase effects and the gap').

Stage 2 on the column effects of stage 1 (``offset_effects``; contents as clusters)::

    delta[column] = c[component] + trend(offset) + gamma[phase]

with the trend chosen and checked by ``trend.select_trend``. ``gamma`` is reported as deviations
from its mean over phases (percentage points). Why a linear probability model: effects come
out in percentage points, the unit of the gap; no separation problem at 0 % or 100 %; closed
form, so one wild cluster bootstrap of stage 1 serves every statistic.

Inference (wild cluster bootstrap by content, Webb weights, CR1-studentized):

* the gap is the largest pairwise phase contrast; its interval comes from simultaneous
  intervals for all contrasts (bootstrap distribution of the largest |t|):
  ``[max(0, max(|d| - c·se)), max(|d| + c·se)]``. It contains the true gap whenever every
  contrast interval covers its contrast (>= 95 %) and it can contain zero; the gap p-value is
  the same max-|t| test, so the interval excludes zero exactly when p < 0.05;
* the max - min of noisy effects is biased upward (a 5 pp truth read 9 pp at 30 contents; most
  where several phases tie at the top or bottom), so the reported gap is **bias-corrected by data
  fission** (Leiner et al. 2023): each bootstrap deviation ``n_b`` splits the estimate into two
  independent halves, ``effects + n_b`` that picks the best and worst phase and ``effects - n_b``
  that measures them, and the gap is the mean over draws of the measured contrast (kept inside
  the interval). It is unbiased for the contrast of the phases it picks: tied phases cost
  nothing, a wrong pick only a little. Measured against the inversion it replaced (issue #43,
  ``experiments/gap_bias.py``): mean error +0.1 instead of +1.4 pp at 30 pp with three tied top
  phases, +1.2 instead of +2.2 pp with no effect at 60 contents, -1.3 instead of +0.3 pp at a
  5 pp effect, and a smaller RMSE in all rows but one (docs/sweeps.md, "The gap's bias");
  the plug-in max - min is reported beside it;
* homogeneity: the cluster-robust Wald statistic of all phase effects, bootstrapped the same way.

Nothing is reported as drift-adjusted when the trend cannot be separated from the phases
(fewer than three windows, or a misfit even at the most flexible separable trend): the note
says why, and only the raw per-phase accuracies remain.

Shape legend: J columns, K coefficients, E estimable phases, Q = E(E-1)/2 pairs, B draws.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from phasescope.analysis.cluster_ols import bootstrap_p, critical_value, studentized
from phasescope.analysis.offset_effects import MIN_CONTENTS, Linear, OffsetEffects, few_varying_advice, linear
from phasescope.analysis.trend import TrendChoice, design, label_rows, select_trend, wls_map


@dataclass
class PhaseEffects:
    phases: list[int]  # phases observed, in order
    effects: np.ndarray | None = None  # [E] deviation of each phase from the mean over phases (accuracy units)
    effect_ci: np.ndarray | None = None  # [E,2] 95% interval of each effect (one at a time)
    gap: float | None = None  # bias-corrected largest minus smallest effect
    gap_plugin: float | None = None  # largest minus smallest effect as estimated
    gap_ci: tuple[float, float] | None = None
    gap_p: float | None = None
    homogeneity_p: float | None = None
    trend: TrendChoice | None = None
    drift: np.ndarray | None = None  # [J] fitted trend at each column (no phase part), for per-content statistics
    note: str | None = None


def fit_phase_effects(fx: OffsetEffects | None, level: float = 0.95, fixed_degree: int | None = None) -> PhaseEffects:
    """``fixed_degree``: skip the data-chosen trend (0: the drift ignored; for calibration contrasts)."""
    if fx is None:
        return PhaseEffects([], note="phase effects are not estimable: no column is compared within a content")
    phases = sorted(int(p) for p in np.unique(fx.phase))
    if len(phases) < 2:
        return PhaseEffects(phases, note=_one_phase(phases))
    choice = select_trend(fx, fx.phase, "phase", fixed_degree)
    if choice.degree is None or (fx.inference and fixed_degree is None and not choice.checked):
        return PhaseEffects(phases, trend=choice, note=f"drift-adjusted phase effects withheld: {choice.note}")
    x = design(fx.offset, choice.degree, fx.phase, fx.component)
    fitted = linear(fx, wls_map(x, fx.weight))
    rows = label_rows(len(phases), x.shape[1])
    effects = rows @ fitted.theta
    gap = float(np.ptp(effects))
    n_trend = fx.n_components + choice.degree  # the components' intercepts and the trend: no phase part
    drift = x[:, :n_trend] @ fitted.theta[:n_trend]
    out = PhaseEffects(phases, effects, gap=gap, gap_plugin=gap, trend=choice, drift=drift)
    if not fx.inference:
        out.note = (
            f"only {fx.n_informative} content samples whose answers vary: intervals and p-values need at least "
            f"{MIN_CONTENTS} ({few_varying_advice(fx.n_informative, fx.n_contents)}); the numbers describe these "
            "contents only, and the gap is not bias-corrected"
        )
        return out
    return _inference(out, fitted, rows, level)


def pairwise(rows: np.ndarray) -> np.ndarray:
    """[Q,K] gamma_p - gamma_q for p < q."""
    n = len(rows)
    return np.array([rows[p] - rows[q] for p in range(n) for q in range(p + 1, n)])


def range_bounds(pairs: np.ndarray, theta: np.ndarray, cov: np.ndarray, crit: float) -> tuple[float, float]:
    """The max - min range's interval from simultaneous intervals of every pairwise contrast
    ``pairs @ theta`` at critical value ``crit``: [max(0, max(|d| - c·se)), max(|d| + c·se)]."""
    size = np.abs(pairs @ theta)
    se = np.sqrt(np.maximum(np.einsum("qk,kl,ql->q", pairs, cov, pairs), 0.0))
    return float(max(0.0, (size - crit * se).max())), float((size + crit * se).max())


def _inference(out: PhaseEffects, fitted: Linear, rows: np.ndarray, level: float) -> PhaseEffects:
    pairs = pairwise(rows)
    max_t = np.abs(studentized(pairs, fitted.boot, fitted.boot_cov)).max(axis=-1)  # [B]
    low, high = range_bounds(pairs, fitted.theta, fitted.cov, float(critical_value(max_t, level)))
    effect_se = np.sqrt(np.maximum(np.einsum("ek,kl,el->e", rows, fitted.cov, rows), 0.0))
    effect_crit = critical_value(np.abs(studentized(rows, fitted.boot, fitted.boot_cov)), level)
    out.effect_ci = np.stack([out.effects - effect_crit * effect_se, out.effects + effect_crit * effect_se], axis=1)
    out.gap = float(np.clip(fission_gap(out.effects, fitted.boot @ rows.T), low, out.gap_plugin))
    out.gap_ci = (low, high)
    out.gap_p = bootstrap_p(max_t, float(np.abs(studentized(pairs, fitted.theta, fitted.cov)).max()))
    out.homogeneity_p = _homogeneity(fitted, len(rows))
    return out


def fission_gap(effects: np.ndarray, noise: np.ndarray) -> float:
    """Mean over draws of (effects - noise_b) at the best minus the worst phase of (effects + noise_b).
    effects [E]; noise [B,E] bootstrap deviations. For Gaussian noise of the estimate's covariance
    the two halves are independent, so the picking does not inflate the measured contrast."""
    pick, measure = effects[None] + noise, effects[None] - noise  # [B,E] each
    draws = np.arange(len(noise))
    contrast = measure[draws, pick.argmax(axis=1)] - measure[draws, pick.argmin(axis=1)]  # [B]
    return float(contrast.mean())


def _homogeneity(fitted: Linear, n_phases: int) -> float:
    """Bootstrap p-value of the cluster-robust Wald statistic of the phase indicators."""
    g = slice(len(fitted.theta) - n_phases + 1, None)
    observed = _wald(fitted.theta[g], fitted.cov[g, g])
    null = _wald(fitted.boot[:, g], fitted.boot_cov[:, g, g])
    return bootstrap_p(null, float(observed), tol=WALD_TOL)


WALD_TOL = 1e-6  # Wald statistics closer than this are equal (chi-square scale: far below any evidence)


def _wald(gamma: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """gammaᵀ cov⁻¹ gamma for [...,G] and [...,G,G], in the eigenbasis of cov with its variances
    floored at 1e-16 (a standard error of 1e-8): a direction with no spread and no effect adds ~0, one with no spread
    but an effect (every content answers alike) adds a huge amount. (A pseudo-inverse inverted rounding
    noise when the whole covariance was ~0 and made finer periods "significant" at random.)"""
    variances, vectors = np.linalg.eigh(cov)
    along = np.einsum("...gh,...g->...h", vectors, gamma)
    return (along**2 / np.maximum(variances, 1e-16)).sum(axis=-1)


def _one_phase(phases: list[int]) -> str:
    seen = ", ".join(map(str, phases)) or "none"
    return (
        f"phases observed: {seen}; phase effects need records at two phases or more "
        "(offsets must cover every phase; e.g. --offsets 0:24)"
    )
