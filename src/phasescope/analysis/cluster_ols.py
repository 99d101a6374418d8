"""Weighted least squares with one cluster per content, and its wild cluster bootstrap.

Every estimate phasescope reports with an interval (phase effects, the gap, the same-window
contrast) is a linear model fitted to cell means, with content samples as clusters: records
of one content share its difficulty and are not independent. Inference is the wild cluster
bootstrap (Cameron, Gelbach & Miller 2008) with Webb's six-point weights, which stays usable
with a few dozen clusters, studentized with the cluster-robust (CR1) covariance.

Because the regressors are fixed, a bootstrap refit is linear algebra on per-cluster sums:
``beta* - beta = A⁻¹ Sᵀv`` and the refit's cluster scores are ``v_c S_c - H_c (beta* - beta)``,
so B refits cost O(B·C·K²) whatever the number of records.

Shape legend: M cells, K regressors, C clusters (contents), B bootstrap draws.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

# Webb (2014) six-point weights: mean 0, variance 1, 6^C distinct draws for C clusters.
WEBB = np.array([-np.sqrt(1.5), -1.0, -np.sqrt(0.5), np.sqrt(0.5), 1.0, np.sqrt(1.5)])
CHUNK = 256  # bootstrap draws per vectorised block (bounds memory at B·C·K floats per block)


def within(values: np.ndarray, cluster: np.ndarray, weight: np.ndarray, n_clusters: int) -> np.ndarray:
    """Subtract each cluster's weighted mean (content fixed effects). values [M] or [M,K]."""
    flat = values.reshape(len(values), -1)
    total = np.bincount(cluster, weights=weight, minlength=n_clusters)
    means = (
        np.stack([np.bincount(cluster, weights=weight * col, minlength=n_clusters) for col in flat.T], axis=1)
        / np.maximum(total, 1e-300)[:, None]
    )
    return (flat - means[cluster]).reshape(values.shape)


@dataclass
class ClusterFit:
    """A fitted model: beta [K], A⁻¹ [K,K], per-cluster scores S [C,K] and Hessian blocks H [C,K,K]."""

    beta: np.ndarray
    a_inv: np.ndarray
    scores: np.ndarray
    hessians: np.ndarray
    factor: float  # CR1 small-sample factor

    @property
    def covariance(self) -> np.ndarray:
        return self.factor * self.a_inv @ (self.scores.T @ self.scores) @ self.a_inv

    def draws(self, rng: np.random.Generator, n_boot: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Wild cluster bootstrap: blocks of (beta* - beta [b,K], covariance* [b,K,K])."""
        n_clusters, k = self.scores.shape
        chunk = max(8, min(CHUNK, 4_000_000 // max(n_clusters * k, 1)))  # bounds memory at ~32 MB a block
        for start in range(0, n_boot, chunk):
            v = rng.choice(WEBB, size=(min(chunk, n_boot - start), n_clusters))
            delta = (v @ self.scores) @ self.a_inv
            # refit scores v_c S_c - H_c delta [b,C,K], as one matrix product laid out as used (a
            # transposed view made the subtraction memory-bound: half the time of the draws)
            scores = v[:, :, None] * self.scores[None]
            scores -= (delta @ self.hessians.reshape(n_clusters * k, k).T).reshape(len(v), n_clusters, k)
            meat = scores.transpose(0, 2, 1) @ scores
            yield delta, self.factor * self.a_inv @ meat @ self.a_inv


def fit(x: np.ndarray, y: np.ndarray, weight: np.ndarray, cluster: np.ndarray, n_clusters: int) -> ClusterFit:
    """Weighted least squares of y [M] on x [M,K] (already demeaned when fixed effects are wanted).

    weight = records per cell, so the fit equals least squares on the records themselves.
    """
    a = x.T @ (weight[:, None] * x)
    a_inv = np.linalg.inv(a)
    beta = a_inv @ (x.T @ (weight * y))
    resid = weight * (y - x @ beta)  # record-level residuals summed per cell
    k = x.shape[1]
    scores = np.zeros((n_clusters, k))
    np.add.at(scores, cluster, x * resid[:, None])
    hessians = np.zeros((n_clusters, k, k))
    order = np.argsort(cluster, kind="stable")
    bounds = np.searchsorted(cluster[order], np.arange(n_clusters + 1))
    for c in np.flatnonzero(np.diff(bounds)):  # one small matrix product per cluster (np.add.at was 10x slower)
        rows = order[bounds[c] : bounds[c + 1]]
        hessians[c] = x[rows].T @ (weight[rows, None] * x[rows])
    n_records = float(weight.sum())
    used = int((np.bincount(cluster, minlength=n_clusters) > 0).sum())
    factor = used / max(used - 1, 1) * (n_records - 1) / max(n_records - k, 1)
    return ClusterFit(beta, a_inv, scores, hessians, factor)


def full_rank(x: np.ndarray, weight: np.ndarray) -> bool:
    if x.shape[1] == 0:
        return False
    a = x.T @ (weight[:, None] * x)
    return bool(np.linalg.matrix_rank(a, tol=1e-9 * max(np.abs(a).max(), 1e-300)) == x.shape[1])


def studentized(contrast: np.ndarray, delta: np.ndarray, covariance: np.ndarray) -> np.ndarray:
    """t statistics of linear contrasts R [Q,K] for deltas [...,K] with covariances [...,K,K]."""
    value = delta @ contrast.T
    var = np.einsum("qk,...kl,ql->...q", contrast, covariance, contrast)
    return safe_ratio(value, np.sqrt(np.maximum(var, 0.0)))


def safe_ratio(value: np.ndarray, se: np.ndarray) -> np.ndarray:
    """value / se, with 0/0 = 0 (a contrast with no variance and no effect, e.g. 100% everywhere)."""
    tiny = 1e-12
    ratio = value / np.maximum(se, tiny)
    return np.where((se <= tiny) & (np.abs(value) <= tiny), 0.0, ratio)


def bootstrap_p(null: np.ndarray, observed: float, tol: float = 1e-12) -> float:
    """Share of bootstrap statistics at or above the observed one (within ``tol``: rounding noise
    is not evidence), counting the observation."""
    return float((1 + np.sum(null >= observed - tol)) / (1 + len(null)))


def critical_value(null: np.ndarray, level: float = 0.95, axis: int = 0) -> np.ndarray:
    """The bootstrap critical value matching ``bootstrap_p``: an observed statistic above it has
    p < 1 - level, so an interval built from it excludes a value exactly when the test rejects it."""
    ordered = np.sort(null, axis=axis)
    n = ordered.shape[axis]
    index = min(n - 1, max(0, n - int(np.ceil((1 - level) * (n + 1) - 1e-9)) + 1))  # 1e-9: float 1 - 0.95
    return np.take(ordered, index, axis=axis)
