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
  0.25, 0.5 (the plain sweep), 0.75 and 1: per depth, the seeds periodic at the step by the one
  period rule (``verdicts.periodic_at_step``) and the mean gap +- sd; the pre-set reading.
* **7c** ``tiny-s8`` read by 7a's factor instead of by the longest period.
"""

from __future__ import annotations

import numpy as np

from phasescope.phases import FACTORS
from phasescope.reproduce.matrix import DEPTH_VARIANTS, DEPTHS, LEARNED_BAND
from phasescope.reproduce.verdicts import ALPHA, periodic_at_step

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
    if not factors or all(t.get("adjusted_p") is None for t in factors.values()):
        return "not tested"  # the analysis withheld every factor's test: not "none"
    claimed = [name for name, t in factors.items() if t.get("adjusted_p") is not None and t["adjusted_p"] < ALPHA]
    if not claimed:
        return "none"
    return claimed[0] if len(claimed) == 1 else "several"


def _upper(test: dict | None) -> float | None:
    """The upper end of a factor's 95% interval of its max - min effect (simultaneous over its class
    contrasts), pp: the largest effect the seed's data leave possible. None when not bounded."""
    ci = (test or {}).get("range_ci_pp")
    return None if ci is None else float(ci[1])


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
        "upper_pp": {f: _upper(t) for f, t in factors.items()},
    }


def other_bounds(seeds: list[dict], reading: str) -> dict[str, dict]:
    """Issue #60 item 2: how large the factors a reading does not name can be. Per factor: the largest
    upper bound over the seeds (``bound_pp``; None when a seed has none) and whether every seed puts it
    below the named factor's own lower bound (``below``: the data put that factor's effect under the
    named one's, an equivalence reading with the named effect as the margin). With no factor named
    (``none``), every factor is listed and none is "below"."""
    out = {}
    for factor in FACTORS:
        if factor == reading or not any(factor in s["upper_pp"] for s in seeds):
            continue
        uppers = [s["upper_pp"].get(factor) for s in seeds]
        bound = None if any(u is None for u in uppers) else max(uppers)
        below = (
            reading in FACTORS
            and bound is not None
            and all(s["size_ci_pp"] is not None and u < s["size_ci_pp"][0] for s, u in zip(seeds, uppers, strict=True))
        )
        out[factor] = {"bound_pp": bound, "below": below}
    return out


def factor_reading(rows: list[dict], recipe: str, variants: tuple[str, ...] = CROSSED) -> dict:
    """7a for one recipe: every counted seed's factor, and the recipe's (the one all give, else mixed),
    with how large the other factors' effects can be (``other_bounds``); from its ``variants``'
    crossed sweeps."""
    crossed = [r for r in rows if r["recipe"] == recipe and r.get("variant") in variants and counted(r)]
    seeds = [_seed_reading(r) for r in sorted(crossed, key=lambda r: r["seed"])]
    names = {s["factor"] for s in seeds}
    reading = "no counted seed" if not seeds else names.pop() if len(names) == 1 else "mixed"
    sizes = [s["size_pp"] for s in seeds if s["size_pp"] is not None]
    mean = float(np.mean(sizes)) if sizes and reading in FACTORS else None
    return {"recipe": recipe, "reading": reading, "seeds": seeds, "mean_size_pp": mean,
            "others": other_bounds(seeds, reading)}  # fmt: skip


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
                "at_step": [r["seed"] for r in swept if periodic_at_step(r)],  # the one period rule
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
