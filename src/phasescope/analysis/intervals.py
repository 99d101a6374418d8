"""A mean with its t 95% interval and one-sample t-test p, over independent units (contents, seeds,
models) — for the few-unit summaries of ablation and reproduction."""

from __future__ import annotations

import numpy as np


def t_summary(values) -> dict:
    """n, mean, t 95% interval and a one-sample t-test p against 0; the interval and p need two
    values, and p needs them to vary (None otherwise)."""
    from scipy.stats import t as student_t

    values = np.asarray(values, dtype=float)
    n = len(values)
    row = {"n": n, "mean": None, "ci_low": None, "ci_high": None, "p_value": None}
    if n == 0:
        return row
    mean = float(values.mean())
    row["mean"] = mean
    if n > 1:
        se = float(values.std(ddof=1) / np.sqrt(n))
        half = float(student_t.ppf(0.975, n - 1) * se)
        row["ci_low"], row["ci_high"] = mean - half, mean + half
        if se > 0:
            row["p_value"] = float(2 * student_t.sf(abs(mean) / se, n - 1))
    return row


def welch_difference(values, baseline) -> dict:
    """mean(values) − mean(baseline) between two independent groups (e.g. seeds of two recipes),
    with Welch's t 95% interval and p; interval and p need two varying values in each group."""
    from scipy.stats import ttest_ind

    a, b = np.asarray(values, dtype=float), np.asarray(baseline, dtype=float)
    row = {"n": (len(a), len(b)), "diff": None, "ci_low": None, "ci_high": None, "p_value": None}
    if len(a) == 0 or len(b) == 0:
        return row
    row["diff"] = float(a.mean() - b.mean())
    if len(a) > 1 and len(b) > 1 and (a.std() > 0 or b.std() > 0):
        test = ttest_ind(a, b, equal_var=False)
        ci = test.confidence_interval(0.95)
        row.update(ci_low=float(ci.low), ci_high=float(ci.high), p_value=float(test.pvalue))
    return row
