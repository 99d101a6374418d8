"""Same-window vs split-window at equal value phase (docs/design.md, 'Same-window contrast').

Whether a key and its value share a compression entry is, for one prompt format, a function
of the value's phase (s = w = 4, one-token key and value: "split" is exactly phase 0), so a
pooled same-vs-split comparison is a relabelled phase comparison. To separate them a probe
renders each content in two or more *variants* that differ in how far the key sits before
the value (``--kv-gaps 0,1``: filler tokens between key and value) while the value keeps
its position, hence its phase. At a value phase where one variant's pair shares a window and
the other's straddles a boundary, the paired difference between the variants is

    variant effect (the format itself)  +  same-window effect

and at phases where both variants have the same window status it is the variant effect
alone. The model, fitted to the paired differences (contents are clusters)::

    y[v0] - y[v] = f[v] + tau * (same[v0] - same[v])

gives ``tau``, the same-window advantage at equal value phase with the format effect
removed, with a wild-cluster-bootstrap interval and p-value. Its assumption: the format
effect does not depend on the phase (it is measured at the concordant phases and
subtracted at the discordant ones). The drift common to both renderings cancels in the
difference; the format effect may drift too, so ``f[v]`` carries the same trend over offsets
as the phase effects (``trend_degree``, Legendre polynomials; lowered when it would absorb the
window contrast, and the output says which degree was used).

Shape legend: M paired (content, offset, variant) rows.
"""

from __future__ import annotations

import numpy as np

from phasescope.analysis.cluster_ols import bootstrap_p, critical_value, fit, full_rank, studentized
from phasescope.analysis.offset_effects import MIN_CONTENTS
from phasescope.analysis.records import RecordArrays, unique_rows
from phasescope.analysis.trend import legendre


def _cell_means(r: RecordArrays) -> dict[tuple[int, int, int], tuple[float, float, int]]:
    """(content, offset, variant) -> (accuracy, same-window flag, value phase), keyed in the order the
    records first show each cell (the fit's rows follow it); the flag and phase are the first
    record's. Grouped by numpy (a Python loop over the records took 20 ms a sweep); the answers are
    0/1, so each cell's sum is an exact integer whatever the order of the additions."""
    keys, cell = unique_rows(np.stack([r.content, r.offset, r.variant], axis=1))
    first = np.full(len(keys), len(cell))
    np.minimum.at(first, cell, np.arange(len(cell)))
    accuracy = np.bincount(cell, weights=r.correct, minlength=len(keys)) / np.bincount(cell, minlength=len(keys))
    order = np.argsort(first)
    rows = first[order]  # each cell's first record
    cells = zip(
        keys[order].tolist(),
        accuracy[order].tolist(),
        r.same_window[rows].tolist(),
        r.phase[rows].tolist(),
        strict=True,
    )
    return {(int(c), int(d), int(v)): (y, float(same), int(phase)) for (c, d, v), y, same, phase in cells}


def _status_by_phase(r: RecordArrays) -> dict[int, list[str]]:
    known = ~np.isnan(r.same_window)
    return {
        int(p): sorted({"same" if s else "split" for s in r.same_window[known & (r.phase == p)]})
        for p in np.unique(r.phase[known])
    }


def window_contrast(
    r: RecordArrays, rng: np.random.Generator, n_boot: int = 2000, level: float = 0.95, trend_degree: int = 1
) -> dict | None:
    if np.isnan(r.same_window).all():
        return None  # the probe has no keys
    by_phase = _status_by_phase(r)
    cells = _cell_means(r)
    variants = sorted({v for _, _, v in cells})
    rows = []  # (content, variant, difference, status difference, phase, offset)
    for (c, d, v), (y, same, phase) in cells.items():
        ref = cells.get((c, d, variants[0]))
        if v != variants[0] and ref is not None and not np.isnan(same) and not np.isnan(ref[1]):
            rows.append((c, variants.index(v), ref[0] - y, ref[1] - same, phase, d))
    result = {"status_by_phase": {str(p): s for p, s in by_phase.items()}, "variants": variants}
    if not rows or all(row[3] == 0 for row in rows):
        return result | {"separable": False, "note": _inseparable_note(len(variants))}
    content = np.array([row[0] for row in rows])
    y = np.array([row[2] for row in rows])
    weight = np.ones(len(rows))
    status = np.array([row[3] for row in rows], dtype=float)
    discordant = status != 0
    x, degree = _design(rows, len(variants), trend_degree)
    result |= {
        "discordant_phases": sorted({row[4] for row in rows if row[3] != 0}),
        "n_pairs": len(rows),
        "n_discordant": int(discordant.sum()),
        "raw_same_minus_split_pp": float(100 * (y[discordant] * status[discordant]).mean()),
        "trend_degree": degree,
    }
    if x is None:
        return result | {
            "separable": False,
            "note": "every value phase where the variants differ in window status is discordant the same way and "
            "no phase is concordant, so the format effect cannot be told from the window effect",
        }
    n_contents = len(np.unique(content))
    index = {c: i for i, c in enumerate(np.unique(content))}
    model = fit(x, y, weight, np.array([index[c] for c in content]), n_contents)
    tau_row = np.zeros((1, x.shape[1]))
    tau_row[0, -1] = 1.0
    tau = float(model.beta[-1])
    result |= {
        "separable": True,
        "same_minus_split_pp": 100 * tau,
        "format_effect_pp": {str(v): float(100 * model.beta[i]) for i, v in enumerate(variants[1:])},
    }
    if n_contents < MIN_CONTENTS:
        return result | {"ci_pp": None, "p_value": None, "note": f"only {n_contents} content samples; no interval"}
    observed = abs(float(studentized(tau_row, model.beta, model.covariance)[0]))
    null = np.concatenate([np.abs(studentized(tau_row, d, c)[:, 0]) for d, c in model.draws(rng, n_boot)])
    se = float(np.sqrt(model.covariance[-1, -1]))
    crit = float(critical_value(null, level))
    return result | {
        "ci_pp": [100 * (tau - crit * se), 100 * (tau + crit * se)],
        "p_value": bootstrap_p(null, observed),
    }


def _design(rows: list[tuple], n_variants: int, degree: int) -> tuple[np.ndarray | None, int | None]:
    """[M, K]: each variant's format effect, its drift over offsets (Legendre 1..degree), and the
    window-status difference (last); the degree is lowered until the design is full rank (None:
    not even a constant format effect leaves the window contrast estimable)."""
    offset = np.array([row[5] for row in rows], dtype=float)
    variant = np.array([row[1] for row in rows])
    status = np.array([[row[3]] for row in rows], dtype=float)
    for k in range(max(degree, 0), -1, -1):
        blocks = []
        for v in range(1, n_variants):
            mine = (variant == v).astype(float)[:, None]
            blocks += [mine, mine * legendre(offset, k)]
        x = np.concatenate([*blocks, status], axis=1)
        if full_rank(x, np.ones(len(rows))):
            return x, k
    return None, None


def _inseparable_note(n_variants: int) -> str:
    if n_variants < 2:
        return (
            "the geometry cannot separate same-window from phase: with one prompt format the window status is a "
            "function of the value's phase; rerun the sweep with --kv-gaps 0,1 (two key-value spacings)"
        )
    return (
        "the variants never differ in window status at the same value phase (with this step and window every "
        "spacing puts key and value on the same side of the boundary); try other --kv-gaps"
    )
