"""Amendment 7 (docs/reproduction.md, committed before its sweeps; issue #47): which phase the
effects follow, read by factor, at steps 2, 4 and 8.

* **7a** every counted seed (held-out accuracy at or above the rules' floor) of ``tiny-s4``,
  ``tiny-v4.1``, ``tiny-s8`` and ``hf-deepseek-v4-tiny``, shipped and held-out seeds, swept with
  ``--design crossed`` (variants ``crossed-24`` / ``crossed-64``). Per seed the factor statistics,
  Holm-adjusted with the verdict's other tests, name the factor: *needle*, *prompt end* or
  *distance* when that factor's adjusted p < alpha and no other's is; *several* when two or more
  are; *none* when none is. Its size: the factor's max - min phase effect with its interval. Per
  recipe: the name every counted seed gives, else *mixed*.
* **7b** ``tiny-v4.1`` (step 2) and its control ``tiny-s4`` swept with shift-needle at depths 0,
  0.25, 0.5 (the plain sweep), 0.75 and 1: per depth, the seeds whose detected period is the step
  (p < alpha) and the mean gap +- sd; the pre-set reading.
* **7c** ``tiny-s8`` read by 7a's factor instead of by the longest period.
"""

from __future__ import annotations

import numpy as np

from phasescope.phases import FACTORS
from phasescope.reproduce.matrix import DEPTH_VARIANTS, DEPTHS, LEARNED_BAND
from phasescope.reproduce.verdicts import ALPHA

RECIPES = ("tiny-s4", "tiny-v4.1", "tiny-s8", "hf-deepseek-v4-tiny")
CROSSED = ("crossed-24", "crossed-64")
# 7b: each depth and the variant swept at it (0.5: the plain sweep)
SWEPT_AT = dict(sorted({0.5: "plain", **dict(zip(DEPTHS, DEPTH_VARIANTS, strict=True))}.items()))
STEP2, CONTROL = "tiny-v4.1", "tiny-s4"


def counted(row: dict) -> bool:
    """A seed counts when its held-out accuracy is at or above the rules' floor (amendment 7)."""
    return not row.get("missing") and (row.get("eval_accuracy") or 0.0) >= LEARNED_BAND[0]


def factor_name(factors: dict | None) -> str:
    """7a's name for one seed from its factor tests' Holm-adjusted p-values."""
    if not factors:
        return "not tested"
    claimed = [name for name, t in factors.items() if t.get("adjusted_p") is not None and t["adjusted_p"] < ALPHA]
    if not claimed:
        return "none"
    return claimed[0] if len(claimed) == 1 else "several"


def _seed_reading(row: dict) -> dict:
    factors = row.get("factors") or {}
    name = factor_name(factors)
    size = factors.get(name, {})
    return {
        "seed": row["seed"],
        "held_out": bool(row.get("held_out")),
        "factor": name,
        "size_pp": size.get("range_pp"),
        "size_ci_pp": size.get("range_ci_pp"),
        "adjusted_p": {f: t.get("adjusted_p") for f, t in factors.items()},
        "sizes_pp": {f: t.get("range_pp") for f, t in factors.items()},
    }


def factor_reading(rows: list[dict], recipe: str) -> dict:
    """7a for one recipe: every counted seed's factor, and the recipe's (the one all give, else mixed)."""
    crossed = [r for r in rows if r["recipe"] == recipe and r.get("variant") in CROSSED and counted(r)]
    seeds = [_seed_reading(r) for r in sorted(crossed, key=lambda r: r["seed"])]
    names = {s["factor"] for s in seeds}
    reading = "no counted seed" if not seeds else names.pop() if len(names) == 1 else "mixed"
    sizes = [s["size_pp"] for s in seeds if s["size_pp"] is not None]
    mean = float(np.mean(sizes)) if sizes and reading in FACTORS else None
    return {"recipe": recipe, "reading": reading, "seeds": seeds, "mean_size_pp": mean}


def _at_step(row: dict) -> bool:
    p = row.get("period_p")
    return p is not None and p < ALPHA and row.get("period") == row["step"]


def depth_table(rows: list[dict], recipe: str) -> list[dict]:
    """7b for one recipe: per depth, the counted seeds at the step's period and the gaps."""
    out = []
    for depth, variant in SWEPT_AT.items():
        swept = [r for r in rows if r["recipe"] == recipe and r.get("variant") == variant and counted(r)]
        gaps = [r["gap_pp"] for r in swept if r.get("gap_pp") is not None]
        out.append(
            {
                "depth": depth,
                "seeds": [r["seed"] for r in swept],
                "at_step": [r["seed"] for r in swept if _at_step(r)],
                "withheld": [r["seed"] for r in swept if r.get("period_p") is None],  # not testable, not "no"
                "gap_mean_pp": float(np.mean(gaps)) if gaps else None,
                "gap_sd_pp": float(np.std(gaps, ddof=1)) if len(gaps) > 1 else None,
            }
        )
    return out


def depth_reading(step2: list[dict], control: list[dict]) -> str:
    """7b's pre-set statement, or "no reading" when neither of its two patterns holds."""
    by = lambda table: {row["depth"]: row for row in table}  # noqa: E731
    s2, s4 = by(step2), by(control)
    every = lambda row: bool(row["seeds"]) and row["at_step"] == row["seeds"]  # noqa: E731
    if every(s2[0.5]) and s2[1.0]["seeds"] and not s2[1.0]["at_step"] and every(s4[0.5]) and every(s4[1.0]):
        return "step 2 holds only with the needle far from the question"
    if all(every(row) for row in step2):
        return "step 2 holds at every depth"
    return "no reading"


def judge_amendment7(rows: list[dict]) -> dict:
    step2, control = depth_table(rows, STEP2), depth_table(rows, CONTROL)
    factors = {recipe: factor_reading(rows, recipe) for recipe in RECIPES}
    return {
        "factors": factors,
        "depth": {STEP2: step2, CONTROL: control, "reading": depth_reading(step2, control)},
        "step8": factors["tiny-s8"],
    }
