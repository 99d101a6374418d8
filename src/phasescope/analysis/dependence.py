"""Phase dependence per content: how strongly each content's own answers depend on the phase,
even when contents disagree on which phase is bad (so the average gap hides it).

For content c let ``gamma_c[p]`` be its own phase effects (deviations from its mean over
phases, with the drift removed). The statistic is their root mean square over phases and
contents::

    rms = sqrt( mean_c mean_p gamma_c[p]^2 )          (percentage points, >= 0 by construction)

Squaring a noisy estimate would add its noise variance (a positive bias that grows with the
noise), so each content's offsets are split into two halves by alternating windows of ``step``
offsets (windows 0, 2, 4, ... and 1, 3, 5, ...), its phase effects are estimated in each half
separately, and the product of the two estimates is used: the halves' noises are independent,
so ``mean_p gamma_A[p] * gamma_B[p]`` is unbiased for ``mean_p gamma_c[p]^2`` whatever the noise.
In each half the common drift (the trend of the phase-effects model) is subtracted and each
content gets its own level and slope (contents drift differently), fitted next to its phase
effects.

Inference over contents (the independent units): the mean of the per-content products with a
t interval, and a one-sided t-test of "no content's answers depend on the phase" (p); the
interval for ``rms`` is the square root of the interval's clipped limits, so it can contain 0.
The same cross-fit of the *average* phase effects gives ``average_rms_pp``: the part every
content shares. ``rms_pp`` well above it means contents prefer different phases.

Needs four windows or more (two per half, so a content's slope can be told from its phases),
every phase in both halves, and ten contents for the interval and p-value.

Shape legend: N records, C contents, S phases (= step).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import t as t_dist

from phasescope.analysis.intervals import t_quantile
from phasescope.analysis.offset_effects import MIN_CONTENTS
from phasescope.analysis.records import RecordArrays, unique_rows
from phasescope.analysis.trend import label_rows

METHOD = (
    "root mean square over contents and phases of each content's own phase effects, drift removed, each content "
    "with its own level and slope; cross-fitted over alternating windows (unbiased, >= 0); t interval and "
    "one-sided t-test over contents"
)


def _windows(r: RecordArrays) -> np.ndarray:
    """[N] window index of each record: offsets d and d+1 share a window unless d+1 starts a new phase cycle."""
    return (r.offset - r.phase) // r.step


def _half_designs(cells: np.ndarray, group: np.ndarray, z: np.ndarray, n: np.ndarray, step: int):
    """Every content half's weighted least squares problem at once (the loop then only solves):
    rows sqrt(n) * [level, offset - the half's mean offset, phase indicators 1..S-1] [M, 2+S-1] and
    sqrt(n) * z [M]. ``cells`` [M, 4] (content, half, offset, phase); ``group`` [M] the half of each."""
    offset, phase = cells[:, 2], cells[:, 3]
    centre = np.bincount(group, weights=offset) / np.bincount(group)  # integer sums: exactly each half's mean
    x = np.concatenate(
        [np.ones((len(z), 1)), (offset - centre[group])[:, None], (phase[:, None] == np.arange(1, step)).astype(float)],
        axis=1,
    )
    root = np.sqrt(n)[:, None]
    return root * x, root[:, 0] * z


def _half_effects(a: np.ndarray, b: np.ndarray, step: int) -> np.ndarray | None:
    """One content's centred phase effects [S] in one half: the least squares solution of its rows
    (``_half_designs``); None when not estimable."""
    beta, _, rank, _ = np.linalg.lstsq(a, b, rcond=None)
    if rank < a.shape[1]:
        return None
    return label_rows(step, a.shape[1]) @ beta


def _cross_fit(r: RecordArrays, drift: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per content whose both halves are estimable: effects in half A and half B, [C', S] each."""
    step, half = r.step, _windows(r) % 2
    z = r.correct - drift
    cells, inverse = unique_rows(np.stack([r.content, half, r.offset, r.phase], axis=1))
    n = np.bincount(inverse).astype(float)
    mean_z = np.bincount(inverse, weights=z) / n
    opens = np.r_[True, np.any(np.diff(cells[:, :2], axis=0) != 0, axis=1)]  # cells sorted by content, half
    group = np.cumsum(opens) - 1
    bounds = np.r_[np.flatnonzero(opens), len(cells)]
    seen = np.zeros((len(bounds) - 1, step), dtype=np.int64)
    np.add.at(seen, (group, cells[:, 3]), 1)  # a half lacking a phase has no phase effects
    a, b = _half_designs(cells, group, mean_z, n, step)
    effects: dict[tuple[int, int], np.ndarray | None] = {}
    for g, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        c, h = (int(v) for v in cells[lo, :2])
        effects[c, h] = _half_effects(a[lo:hi], b[lo:hi], step) if seen[g].min() > 0 else None
    both = [c for c in np.unique(cells[:, 0]) if effects.get((c, 0)) is not None and effects.get((c, 1)) is not None]
    first, second = [effects[c, 0] for c in both], [effects[c, 1] for c in both]
    empty = np.zeros((0, step))
    return (np.array(first), np.array(second)) if first else (empty, empty)


def phase_dependence(r: RecordArrays, drift: np.ndarray | None, level: float = 0.95) -> dict | None:
    """metrics.json's ``phase_dependence``; ``drift`` [N] is the common drift at each record (None:
    the drift could not be separated from the phases, so neither can this)."""
    if drift is None:
        return None
    windows = _windows(r)
    if len(np.unique(windows)) < 4:
        return {"rms_pp": None, "note": "needs four windows of offsets or more (two per half)", "method": METHOD}
    a, b = _cross_fit(r, drift)
    if not len(a):
        return {"rms_pp": None, "note": "no content has every phase in both halves of its offsets", "method": METHOD}
    products = (a * b).mean(axis=1)  # [C'] unbiased for each content's mean squared phase effect
    average = float((a.mean(axis=0) * b.mean(axis=0)).mean())
    out = {
        "rms_pp": float(100 * np.sqrt(max(float(products.mean()), 0.0))),
        "ci_pp": None,
        "p_value": None,
        "average_rms_pp": float(100 * np.sqrt(max(average, 0.0))),
        "n_contents": len(products),
        "method": METHOD,
        "note": None,
    }
    if len(products) < MIN_CONTENTS:
        return out | {"note": f"only {len(products)} content samples: interval and p-value need {MIN_CONTENTS}"}
    mean, se = float(products.mean()), float(products.std(ddof=1) / np.sqrt(len(products)))
    half = t_quantile(0.5 + level / 2, len(products) - 1) * se
    low, high = (100 * np.sqrt(max(v, 0.0)) for v in (mean - half, mean + half))
    if se < 1e-12:  # every content gives the same value (a deterministic model): nothing to test against
        return out | {"note": "every content gives the same value: no sampling variation for an interval or p-value"}
    return out | {"ci_pp": [float(low), float(high)], "p_value": float(t_dist.sf(mean / se, len(products) - 1))}
