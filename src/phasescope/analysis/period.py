"""Period detection on accuracy over offsets (DESIGN.md §3), with the drift modelled.

For each candidate period P the accuracy over offsets (mean over records at each offset) is
fitted by the drift polynomial alone and by the polynomial plus ``offset mod P`` groups; the
F statistic of the groups measures how much of the detrended variance ``offset mod P``
explains (``explained``: the share, drawn as the periodogram). The test statistic is the
smallest F-test p-value over all candidates, and its null distribution comes from
permuting the detrended accuracies across offsets (Freedman & Lane 1983): a permutation
keeps whatever structure the residuals have (a bump the polynomial missed, uneven noise)
and only breaks its alignment with ``offset mod P``, so structure that is not periodic is
not mistaken for a period. If significant, the reported period is the smallest divisor of
the best candidate that the best does not beat in a nested F-test (8 explains everything
4 does, and no more).

A candidate must have at least two offsets in every residue class and leave residual
degrees of freedom; periods the offsets cannot identify are not tried (and the output says
which were tried).

Shape legend: D offsets, R permutations, K trend columns (with the intercept).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import f as f_dist

from phasescope.analysis.cluster_ols import bootstrap_p
from phasescope.analysis.phase_effects import legendre_trend, trend_degree

CHUNK = 500


def _residual_maker(x: np.ndarray) -> np.ndarray:
    """[D,D] projection onto the orthogonal complement of x's columns."""
    return np.eye(len(x)) - x @ np.linalg.pinv(x)


def _candidates(offsets: np.ndarray, n_trend: int) -> list[int]:
    out = []
    for period in range(2, len(offsets) // 2 + 1):
        counts = np.bincount(offsets % period, minlength=period)
        if counts.min() >= 2 and len(offsets) - n_trend - (period - 1) >= 2:
            out.append(period)
    return out


def detect_period(
    offsets: np.ndarray,
    accuracy: np.ndarray,
    rng: np.random.Generator,
    n_perm: int = 2000,
    alpha: float = 0.05,
    max_degree: int = 3,
) -> dict:
    """offsets [D] (distinct), accuracy [D] (mean over records at each offset). The drift
    polynomial has one degree per 6 offsets, at most cubic: candidates run up to D/2, and a
    period of 12 over 24 offsets is only two cycles."""
    degree = trend_degree(len(offsets), 6, min(max_degree, 3))
    trend = np.concatenate(
        [np.ones((len(offsets), 1)), legendre_trend(offsets.astype(float), degree, offsets.min(), offsets.max())],
        axis=1,
    )
    periods = _candidates(offsets, trend.shape[1])
    if not periods:
        return _none(f"{len(offsets)} offsets identify no candidate period (each residue class needs 2 offsets)")
    detrend = _residual_maker(trend)
    resid = detrend @ accuracy  # [D]
    makers = [_residual_maker(np.concatenate([trend, _groups(offsets, p)], axis=1)) for p in periods]
    dof = np.array([len(offsets) - trend.shape[1] - (p - 1) for p in periods], dtype=float)
    extra = np.array([p - 1 for p in periods], dtype=float)

    def f_pvalues(r: np.ndarray) -> np.ndarray:  # r [...,D] -> [..., len(periods)]
        total = ((r @ detrend.T) ** 2).sum(-1)  # a permuted residual is detrended again (Freedman-Lane)
        rss = np.stack([((r @ m.T) ** 2).sum(-1) for m in makers], axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            stat = ((total[..., None] - rss) / extra) / (rss / dof)
        return np.where(total[..., None] > 1e-18, f_dist.sf(np.nan_to_num(stat, posinf=1e300), extra, dof), 1.0)

    observed = f_pvalues(resid)
    null = []
    for start in range(0, n_perm, CHUNK):
        order = np.argsort(rng.random((min(CHUNK, n_perm - start), len(offsets))), axis=1)
        null.append(f_pvalues(resid[order]).min(axis=-1))
    p_value = bootstrap_p(-np.concatenate(null), -float(observed.min()))  # small p-values are extreme
    total = float((resid**2).sum())
    explained = {
        int(p): float(1 - ((m @ resid) ** 2).sum() / total) if total > 1e-18 else 0.0
        for p, m in zip(periods, makers, strict=True)
    }
    detected = None
    if p_value < alpha:
        best = periods[int(observed.argmin())]
        detected = next(
            q for q in periods if best % q == 0 and _nested_p(explained, q, best, len(offsets), trend.shape[1]) > alpha
        )
    return {"detected": detected, "p_value": p_value, "explained": explained, "trend_degree": degree}


def _groups(offsets: np.ndarray, period: int) -> np.ndarray:
    """[D, period-1] dummies of offset mod period (residue 0 is the reference)."""
    return (offsets[:, None] % period == np.arange(1, period)[None]).astype(float)


def _nested_p(explained: dict, small: int, large: int, n: int, n_trend: int) -> float:
    """F-test p-value that grouping by d mod ``large`` explains more than by d mod ``small``
    (a divisor of it, so the models are nested); 1.0 when they are the same period."""
    if small == large:
        return 1.0
    dof_extra, dof_rest = large - small, n - n_trend - (large - 1)
    residual = max(1 - explained[large], 1e-12)
    f_stat = ((explained[large] - explained[small]) / dof_extra) / (residual / dof_rest)
    return float(f_dist.sf(f_stat, dof_extra, dof_rest))


def _none(note: str) -> dict:
    return {"detected": None, "p_value": None, "explained": {}, "note": note}
