"""Can a sweep's offsets answer the question? Said before the sweep (``sweep --dry-run``), from the
offsets and the step alone.

The gap and the period test separate the phases from a drift over offsets with a trend chosen
and checked next to the phases (``trend``). That needs each phase seen in ``MIN_CYCLES`` windows
or more, and room for a trend more flexible than a straight line that the phases do not absorb
(``trend.max_separable_degree``): with 24 offsets at step 8 only a linear drift can be told from
the phases, and a real drift is rarely linear, so the analysis withholds the p-values. The
default offsets (``specs.default_offsets``) cover six windows of the step.
"""

from __future__ import annotations

import numpy as np

from phasescope.analysis.period import candidates
from phasescope.analysis.trend import MIN_CYCLES, cycles, max_separable_degree

FLEXIBLE = 4  # a trend of at least this degree can follow a drift that is not a straight line


def design_check(offsets, step: int) -> dict:
    """``{"windows", "trend_degree", "gap", "period", "advice"}``: "gap" and "period" are "testable",
    "linear drift only" or the reason they cannot be tested; advice: the offsets that would do."""
    offsets = np.array(sorted(set(int(d) for d in offsets)), dtype=float)
    phases = offsets.astype(int) % step
    windows = len(offsets) / step
    top = max_separable_degree(offsets, np.ones(len(offsets)), phases) if len(offsets) > 1 else 0
    seen = cycles(offsets, phases) if len(np.unique(phases)) == step else 0
    if seen < MIN_CYCLES:
        gap = f"not testable: some phase is seen at {seen} offset(s), {MIN_CYCLES} windows or more are needed"
    elif top < 1:
        gap = "not testable: not even a linear drift can be told from the phases with these offsets"
    else:
        gap = "testable" if top >= FLEXIBLE else f"linear drift only (a trend of degree {top} at most)"
    period = (
        gap if step in candidates(offsets.astype(int)) else f"not testable: period {step} needs {MIN_CYCLES} cycles"
    )
    enough = max(24, 6 * step)
    advice = None if gap == "testable" and period == "testable" else f"use --offsets 0:{enough} (six windows)"
    return {"windows": round(windows, 2), "trend_degree": int(top), "gap": gap, "period": period, "advice": advice}
