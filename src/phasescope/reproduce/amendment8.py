"""Amendment 8 (docs/reproduction.md, committed before any model it names was trained; issue #60
item 3): is step 2's depth profile the step's or the pooler's?

A 2 x 2 of step {2, 4} x pooler {scalar gate, channel gate}: ``tiny-s2``, ``tiny-s2-channel``,
``tiny-s4`` and ``tiny-s4-channel`` (equal in all else), seeds 16, 17 and 18 trained for it, each
swept with shift-needle at depths 0, 0.25, 0.5, 0.75 and 1.

* Per seed, the **depth slope**: the least-squares slope of the gap (pp) on the needle's depth
  over the depths whose gap is not withheld; the seed counts when its held-out accuracy is at or
  above the rules' floor and at least 4 of the 5 depths have a gap.
* A cell with fewer than 3 counted seeds gets seeds 19, then 20 (``SPARE``); each cell is judged
  on its first 3 counted seeds in seed order.
* The reading: a two-way ANOVA (effects coded +-1, 3 seeds per cell) of the judged slopes on
  step, pooler and their interaction; the three tests Holm-adjusted at alpha = 0.05. *the step*
  when the step's main effect alone is claimed, *the pooler* when the pooler's alone, *both* when
  both main effects or the interaction are, *neither* when none is; *no reading* when a
  cell ends with fewer than 3 counted seeds.

Run it (after ``bash experiments/train_issue60.sh``)::

    python -m phasescope.reproduce.amendment8 --models runs/issue60/models --out runs/issue60
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from phasescope.reproduce.amendment7 import SWEPT_AT, counted
from phasescope.reproduce.verdicts import ALPHA

CELLS = {  # recipe: (step, pooler)
    "tiny-s2": (2, "scalar"),
    "tiny-s2-channel": (2, "channel"),
    "tiny-s4": (4, "scalar"),
    "tiny-s4-channel": (4, "channel"),
}
SEEDS = (16, 17, 18)
SPARE = (19, 20)  # trained, in order, for a cell left with fewer than MIN_SEEDS counted seeds
MIN_SEEDS = 3
MIN_DEPTHS = 4  # of the five depths, with a gap
TESTS = ("step", "pooler", "step x pooler")


def depth_slope(gaps: dict[float, float | None]) -> float | None:
    """The gap's least-squares slope on depth (pp per unit depth), None under MIN_DEPTHS gaps."""
    known = [(d, g) for d, g in gaps.items() if g is not None]
    if len(known) < MIN_DEPTHS:
        return None
    depth, gap = np.array(known).T
    return float(np.polyfit(depth, gap, 1)[0])


def seed_profiles(rows: list[dict]) -> list[dict]:
    """One entry per (recipe, seed): its gap by depth, its slope and whether it counts."""
    out = []
    for recipe in CELLS:
        seeds = sorted({r["seed"] for r in rows if r["recipe"] == recipe})
        for seed in seeds:
            mine = {r["variant"]: r for r in rows if r["recipe"] == recipe and r["seed"] == seed}
            gaps = {d: (mine.get(v) or {}).get("gap_pp") for d, v in SWEPT_AT.items()}
            slope = depth_slope(gaps)
            trained_well = counted(mine.get("plain") or {})
            out.append(
                {
                    "recipe": recipe,
                    "seed": seed,
                    "gaps_pp": gaps,
                    "slope_pp": slope,
                    "counted": trained_well and slope is not None,
                    "eval_accuracy": (mine.get("plain") or {}).get("eval_accuracy"),
                }
            )
    return out


def anova(profiles: list[dict]) -> dict[str, float]:
    """Two-way ANOVA of the counted slopes: p-value of each of TESTS. Effects coded +-1, so with
    the balanced cells judged (MIN_SEEDS each) each coefficient's t-test is its 1-df F-test."""
    from scipy import stats

    step = np.array([1.0 if CELLS[p["recipe"]][0] == 2 else -1.0 for p in profiles])
    pooler = np.array([1.0 if CELLS[p["recipe"]][1] == "channel" else -1.0 for p in profiles])
    design = np.column_stack([np.ones_like(step), step, pooler, step * pooler])
    slopes = np.array([p["slope_pp"] for p in profiles])
    coef, *_ = np.linalg.lstsq(design, slopes, rcond=None)
    dof = len(slopes) - design.shape[1]
    sigma2 = float(np.sum((slopes - design @ coef) ** 2)) / dof
    se = np.sqrt(sigma2 * np.diag(np.linalg.inv(design.T @ design)))
    p_values = 2 * stats.t.sf(np.abs(coef / se), dof)
    return {name: float(p) for name, p in zip(TESTS, p_values[1:], strict=True)}


def reading(adjusted: dict[str, float]) -> str:
    claimed = {name for name, p in adjusted.items() if p < ALPHA}
    if "step x pooler" in claimed or {"step", "pooler"} <= claimed:
        return "both"
    if claimed == {"step"}:
        return "the step"
    if claimed == {"pooler"}:
        return "the pooler"
    return "neither"


def judge_amendment8(rows: list[dict]) -> dict:
    from phasescope.analysis.verdict import holm

    profiles = seed_profiles(rows)
    # each cell's first MIN_SEEDS counted seeds in seed order (a spare only stands in for a lost seed)
    per_cell = {
        recipe: sorted((p for p in profiles if p["recipe"] == recipe and p["counted"]), key=lambda p: p["seed"])[
            :MIN_SEEDS
        ]
        for recipe in CELLS
    }
    judged = [p for seeds in per_cell.values() for p in seeds]
    short = [recipe for recipe, seeds in per_cell.items() if len(seeds) < MIN_SEEDS]
    cells = {
        recipe: {
            "step": CELLS[recipe][0],
            "pooler": CELLS[recipe][1],
            "seeds": [p["seed"] for p in seeds],
            "slope_mean_pp": float(np.mean([p["slope_pp"] for p in seeds])) if seeds else None,
            "slope_sd_pp": float(np.std([p["slope_pp"] for p in seeds], ddof=1)) if len(seeds) > 1 else None,
            "gap_mean_pp": {d: _mean([p["gaps_pp"][d] for p in seeds]) for d in SWEPT_AT},
        }
        for recipe, seeds in per_cell.items()
    }
    if short:
        return {"reading": "no reading", "short_cells": short, "cells": cells, "profiles": profiles}
    raw = anova(judged)
    adjusted = holm(raw)
    return {
        "reading": reading(adjusted),
        "p": raw,
        "adjusted_p": {t: float(p) for t, p in adjusted.items()},
        "cells": cells,
        "profiles": profiles,
    }


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(np.mean(known)) if known else None


def _fmt(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def markdown(result: dict) -> str:
    """Amendment 8's section of RESULTS.md: the cells' profiles, the slopes and the reading."""
    lines = [f"#### 8: step 2's depth profile, the step's or the pooler's: **{result['reading']}**", ""]
    lines += ["| recipe | step | pooler | seeds | gap pp at depth 0 / 0.25 / 0.5 / 0.75 / 1 | slope pp per depth |"]
    lines += ["| --- | --- | --- | --- | --- | --- |"]
    for recipe, cell in result["cells"].items():
        gaps = " / ".join(_fmt(cell["gap_mean_pp"][d]) for d in SWEPT_AT)
        slope = f"{_fmt(cell['slope_mean_pp'])} ± {_fmt(cell['slope_sd_pp'])}"
        seeds = ", ".join(map(str, cell["seeds"])) or "none"
        lines.append(f"| `{recipe}` | {cell['step']} | {cell['pooler']} | {seeds} | {gaps} | {slope} |")
    lines.append("")
    if "adjusted_p" in result:
        tests = "; ".join(f"{t}: p = {result['p'][t]:.3g} (Holm {result['adjusted_p'][t]:.3g})" for t in TESTS)
        lines.append(f"Two-way ANOVA of the per-seed slopes: {tests}.")
    else:
        lines.append(f"Cells with fewer than {MIN_SEEDS} counted seeds: {', '.join(result['short_cells'])}.")
    return "\n".join(lines) + "\n"


def sweep_all(models: Path, out: Path, samples: int, resamples: int) -> list[dict]:
    """Every trained (recipe, seed) of the 2 x 2 under ``models`` swept at the five depths."""
    from phasescope.reproduce.matrix import Entry
    from phasescope.reproduce.run import sweep_one, trained

    rows = []
    for recipe in CELLS:
        for seed in (*SEEDS, *SPARE):
            model_dir = models / f"{recipe}-s{seed}"
            if not trained(model_dir):
                continue
            for variant in SWEPT_AT.values():
                rows.append(sweep_one(Entry(recipe), seed, model_dir, out, variant, samples, resamples))
    return rows


def runner_args(description: str, name: str, argv: list[str] | None) -> argparse.Namespace:
    """The command line of an amendment's runner (8, 9): where its models are, where its sweeps go."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--models", type=Path, required=True, help="directory of RECIPE-sSEED training runs")
    parser.add_argument("--out", type=Path, required=True, help=f"where the sweeps, {name}.json and {name}.md go")
    parser.add_argument("--samples", type=int, default=256, help="contents per sweep (the rules': 256)")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples per analysis")
    return parser.parse_args(argv)


def write_outputs(out: Path, name: str, payload: dict, text: str) -> None:
    """An amendment runner's results: ``name``.json (``payload``) and ``name``.md (``text``, printed too)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(payload, indent=1, default=str))
    (out / f"{name}.md").write_text(text)
    print(text)


def main(argv: list[str] | None = None) -> None:
    args = runner_args("Sweep and judge amendment 8 (step x pooler, needle depth).", "amendment8", argv)
    result = judge_amendment8(sweep_all(args.models, args.out, args.samples, args.resamples))
    write_outputs(args.out, "amendment8", result, markdown(result))


if __name__ == "__main__":
    main()
