"""One way to print a p-value, everywhere a reader sees one (#46 part 10): two significant
digits down to 0.001, and ``p < 0.001`` below it. A bootstrap's p cannot go below 1/(B+1)
(0.0005 at 1,999 draws) while an analytic test's can (2.2e-16): printed raw, one verdict mixed
the two conventions; below 0.001 neither number means more than "very small"."""

from __future__ import annotations

SMALLEST = 0.001


def p_text(p: float) -> str:
    """``p = 0.03`` or ``p < 0.001``."""
    return f"p < {SMALLEST:g}" if p < SMALLEST else f"p = {p:.2g}"


def p_cell(p: float | None, missing: str = "-") -> str:
    """A table cell: ``0.03`` or ``<0.001``."""
    if p is None:
        return missing
    return f"<{SMALLEST:g}" if p < SMALLEST else f"{p:.2g}"
