"""How often the same content's answer changes when it moves by a step plus or minus one
token, beyond moving it by exactly one step: phase sensitivity per content.

The gap compares phases on average over contents; it can be small although most answers
depend on the phase, when contents prefer different phases (seen on the tiny step-4 model
with pad-prefix: most contents are right at some phases and wrong at others, in different
orders). This statistic sees that. For a distance k in offsets, D(k) is the share of pairs of
records of one content k offsets apart that disagree (one right, one wrong). Pairs s apart
share the phase; pairs s-1 and s+1 apart do not::

    flip rate = (D(s-1) + D(s+1)) / 2 - D(s)

Noise adds the same disagreement at every distance and cancels. Moving the content also
changes other things (shift-needle: the needle's neighbours), so D grows with the distance;
comparing D(s) with its two neighbours removes any linear growth, and the usual saturating
(concave) growth can only push the rate down. Each content gives its own flip rate; the
interval is a t interval over contents (a difference, so it can contain zero).

Shape legend: C contents, D offsets.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import t as t_dist

from phasescope.analysis.phase_effects import MIN_CONTENTS
from phasescope.analysis.records import RecordArrays


def _grid(r: RecordArrays) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Accuracy [C,D] and record counts [C,D] on the grid of offsets, and the offsets [D]."""
    offsets = np.unique(r.offset)
    col = np.searchsorted(offsets, r.offset)
    n = np.zeros((r.n_contents, len(offsets)))
    k = np.zeros_like(n)
    np.add.at(n, (r.content, col), 1)
    np.add.at(k, (r.content, col), r.correct)
    with np.errstate(invalid="ignore", divide="ignore"):
        return k / n, n, offsets


def _disagreement(acc: np.ndarray, observed: np.ndarray, lag: int) -> tuple[np.ndarray, np.ndarray]:
    """Per content: summed disagreement probability of pairs ``lag`` offsets apart, and pair counts [C]."""
    a, b = acc[:, :-lag], acc[:, lag:]
    both = observed[:, :-lag] & observed[:, lag:]
    p = np.where(both, a * (1 - b) + b * (1 - a), 0.0)  # records drawn independently within cells
    return p.sum(1), both.sum(1).astype(float)


def phase_flips(r: RecordArrays, level: float = 0.95) -> dict | None:
    """Flip rate with a t interval over contents (each content contributes its own flip rate,
    contents are independent draws)."""
    acc, n, offsets = _grid(r)
    step = r.step
    if len(offsets) < step + 2 or not np.array_equal(np.diff(offsets), np.ones(len(offsets) - 1)):
        return None  # needs consecutive offsets spanning a step plus one
    observed = n > 0
    acc = np.nan_to_num(acc)
    lags = [lag for lag in (step - 1, step, step + 1) if lag >= 1]
    rates = []
    for lag in lags:
        total, pairs = _disagreement(acc, observed, lag)
        rates.append(np.where(pairs > 0, total / np.maximum(pairs, 1), np.nan))
    per_content = 0.5 * (rates[0] + rates[-1]) - rates[-2]  # [C]
    per_content = per_content[~np.isnan(per_content)]
    if not len(per_content):
        return None
    value = float(per_content.mean())
    out = {"flip_rate_pp": 100 * value, "ci_pp": None, "lags": lags, "n_contents": len(per_content)}
    if len(per_content) < MIN_CONTENTS:
        return out | {"note": f"only {len(per_content)} content samples; no interval"}
    half = t_dist.ppf(0.5 + level / 2, len(per_content) - 1) * per_content.std(ddof=1) / np.sqrt(len(per_content))
    return out | {"ci_pp": [100 * (value - half), 100 * (value + half)]}
