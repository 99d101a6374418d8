"""Amendment 10 (docs/reproduction.md, committed before any model it names was trained; issue #60
item 6): the lightning indexer's threshold.

``hf-deepseek-v4-tiny-topk16`` (transformers' DeepseekV4 keeping 16 compressed entries per query, so
sparse past 64 tokens, its indexer trained on its own KL) and its dense control
``hf-deepseek-v4-tiny`` (every entry kept), seeds 0, 1 and 2 of each, swept with ``--design
crossed`` at ``--context-tokens 64`` (below: prompts of 49-62 tokens) and ``128`` (above: 113-127
tokens). A seed counts when its held-out accuracy is at or above the rules' floor (amendment 7).

* **10a** the period: periodic at the step by the one period rule (``verdicts.periodic_at_step``)
  on every counted seed of the indexer recipe, at both lengths.
* **10b** the gap: the indexer recipe's gap above minus below, against the control's (Welch over
  seeds, 95%): *widens* when the interval lies above 0, *narrows* below 0, otherwise *no change
  shown*, with the largest change the interval leaves possible.
* **10c** the factor: amendment 7a's reading (``amendment7.factor_reading``) at each length.
"""

from __future__ import annotations

import numpy as np

from phasescope.analysis.intervals import welch_difference
from phasescope.reproduce.amendment7 import counted, factor_reading
from phasescope.reproduce.matrix import THRESHOLD_VARIANTS
from phasescope.reproduce.verdicts import MIN_SEEDS, periodic_at_step

INDEXER, CONTROL = "hf-deepseek-v4-tiny-topk16", "hf-deepseek-v4-tiny"
SEEDS = (0, 1, 2)
BELOW, ABOVE = THRESHOLD_VARIANTS
REAL_THRESHOLDS = (
    "DeepSeek-V4 keeps 512 compressed entries per query at step 4, so its attention turns sparse past 2,048 "
    "tokens; V4.1's candidate filter (blocks of 8) starts past 16,384 positions."
)


def _swept(rows: list[dict], recipe: str, variant: str) -> list[dict]:
    mine = [r for r in rows if r["recipe"] == recipe and r.get("variant") == variant and r["seed"] in SEEDS]
    return sorted((r for r in mine if counted(r)), key=lambda r: r["seed"])


def period_reading(rows: list[dict]) -> dict:
    """10a: per length, the counted seeds periodic at the step; *holds* when every counted seed is at
    both lengths (at least MIN_SEEDS), *fails* when a testable seed is not, else *inconclusive*."""
    per_length, verdicts = {}, []
    for variant in THRESHOLD_VARIANTS:
        swept = _swept(rows, INDEXER, variant)
        outcomes = {r["seed"]: periodic_at_step(r) for r in swept}
        per_length[variant] = outcomes
        if any(o is False for o in outcomes.values()):
            verdicts.append("fails")
        elif len(swept) < MIN_SEEDS or any(o is None for o in outcomes.values()):
            verdicts.append("inconclusive")
        else:
            verdicts.append("holds")
    verdict = "fails" if "fails" in verdicts else "inconclusive" if "inconclusive" in verdicts else "holds"
    return {"verdict": verdict, "per_length": per_length}


def _changes(table: list[dict], recipe: str) -> dict[int, float]:
    """seed -> gap above minus gap below (pp), for the seeds of ``seed_table`` with a gap at both lengths."""
    return {
        t["seed"]: t["above_gap_pp"] - t["below_gap_pp"]
        for t in table
        if t["recipe"] == recipe and None not in (t["above_gap_pp"], t["below_gap_pp"])
    }


def gap_reading(rows: list[dict]) -> dict:
    """10b: the change of the gap across the threshold, the indexer recipe's against the control's."""
    table = seed_table(rows)
    mine, control = _changes(table, INDEXER), _changes(table, CONTROL)
    d = welch_difference(list(mine.values()), list(control.values()))
    if min(len(mine), len(control)) < MIN_SEEDS or d["ci_low"] is None:
        reading = "inconclusive"
    elif d["ci_low"] > 0:
        reading = "widens"
    elif d["ci_high"] < 0:
        reading = "narrows"
    else:
        reading = "no change shown"
    largest = None if d["ci_low"] is None else max(abs(d["ci_low"]), abs(d["ci_high"]))
    return {"reading": reading, "indexer_pp": mine, "control_pp": control, "welch": d, "largest_pp": largest}


def accuracy(rows: list[dict]) -> dict:
    """Mean sweep accuracy (%) over counted seeds, per recipe and length."""
    out = {}
    for recipe in (INDEXER, CONTROL):
        for variant in THRESHOLD_VARIANTS:
            values = [100 * r["mean_accuracy"] for r in _swept(rows, recipe, variant)]
            out[f"{recipe} {variant}"] = float(np.mean(values)) if values else None
    return out


def judge_amendment10(rows: list[dict]) -> dict | None:
    if not any(r["recipe"] == INDEXER and r.get("variant") in THRESHOLD_VARIANTS for r in rows):
        return None  # nothing of amendment 10 was swept (a quick reproduction)
    return {
        "period": period_reading(rows),
        "gap": gap_reading(rows),
        "factor": {v: factor_reading(rows, INDEXER, (v,)) for v in THRESHOLD_VARIANTS},
        "control_factor": {v: factor_reading(rows, CONTROL, (v,)) for v in THRESHOLD_VARIANTS},
        "accuracy": accuracy(rows),
        "seeds": seed_table(rows),
    }


def seed_table(rows: list[dict]) -> list[dict]:
    """Per recipe and seed read at both lengths: the gap with its interval and the accuracy at each."""
    out = []
    for recipe in (INDEXER, CONTROL):
        below = {r["seed"]: r for r in _swept(rows, recipe, BELOW)}
        above = {r["seed"]: r for r in _swept(rows, recipe, ABOVE)}
        for seed in sorted(below.keys() & above.keys()):
            out.append({"recipe": recipe, "seed": seed} | {
                f"{side}_{k}": row.get(k) for side, row in (("below", below[seed]), ("above", above[seed]))
                for k in ("gap_pp", "gap_ci_pp", "mean_accuracy")
            })  # fmt: skip
    return out
