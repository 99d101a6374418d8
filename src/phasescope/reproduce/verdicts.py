"""One verdict per claim from the per-(model, seed) rows, pooled over seeds.

Rules (also printed in RESULTS.md):

* only seeds whose model *learned* count (held-out accuracy in the middle band); with fewer than
  ``MIN_SEEDS`` learned seeds an entry is "inconclusive" — never a verdict from a model that did
  not learn;
* an entry is "reproduced" when the test holds on every learned seed, "not reproduced" when it
  holds on none, "inconclusive" otherwise (seeds disagree);
* a seed whose p-value the analysis withheld (too few contents, a drift it cannot separate from
  the phases, a period it could not test) is *not testable*: never a failed test. An entry with
  any such seed is "inconclusive" unless the testable seeds already disagree;
* a claim tested by several entries (``period``: steps 4, 6, 8 and DeepSeek-V4) is reproduced when
  every entry is, not reproduced when any entry is not, inconclusive otherwise.

Tests per claim (alpha = 0.05):

* period / nope / mean / window: the detected period equals the model's step with p < alpha
  (for ``window``: the step, not the window);
* control: no significant period (period p >= alpha) — judged on the matched control;
* same_window: among records whose key and value share a window, the phase gap is significant
  (p < alpha, interval above 0).
"""

from __future__ import annotations

import numpy as np

from phasescope.reproduce.matrix import CLAIMS, MATRIX

ALPHA = 0.05
MIN_SEEDS = 3


# The one period rule (issue #60 item 4): every table and verdict of a reproduction that asks "is this
# seed periodic at the step?" asks it through ``periodic_at_step``; docs/reproduction.md, "The period rule".
PERIOD_RULE = "period = step, or a multiple of it whose step part is significant; p < 0.05"


def periodic_at_step(row: dict) -> bool | None:
    """True / False, or None when the period p-value was withheld (not testable). A detected period
    that is a multiple of the step counts when the step's own component inside it is significant
    (the analysis of issue #29 names such a pattern; amendment 5f's reading, written before it
    existed)."""
    if row.get("period_p") is None:
        return None
    if row.get("period_kind") == "multiple":
        return row["period_p"] < ALPHA and (row.get("step_component_p") or 1.0) < ALPHA
    return row.get("period") == row["step"] and row["period_p"] < ALPHA


def not_periodic(row: dict) -> bool | None:
    if row.get("period_p") is None:
        return None
    return row["period_p"] >= ALPHA


def same_window_effect(row: dict) -> bool | None:
    if row.get("same_window_p") is None:
        return None
    ci = row.get("same_window_ci_pp")
    return row["same_window_p"] < ALPHA and ci is not None and ci[0] > 0


TESTS = {
    "period": (periodic_at_step, PERIOD_RULE),
    "nope": (periodic_at_step, PERIOD_RULE),
    "mean": (periodic_at_step, PERIOD_RULE),
    "window": (periodic_at_step, f"{PERIOD_RULE} (the step, not the window)"),
    "control": (not_periodic, "no significant period (p >= 0.05)"),
    "same_window": (same_window_effect, "phase gap among same-window records, p < 0.05, interval above 0"),
}


def spread(values: list[float]) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "n/a"
    if len(values) == 1:
        return f"{values[0]:.1f}"
    listed = ", ".join(f"{v:.1f}" for v in values)
    span = f"range {min(values):.1f}–{max(values):.1f}"
    return f"{np.mean(values):.1f} ± {np.std(values, ddof=1):.1f}, {span} (seeds: {listed})"


def entry_verdict(rows: list[dict], claim: str) -> dict:
    """Verdict of one recipe's seeds for one claim, with the numbers that decide it."""
    test, rule = TESTS[claim]
    learned = [r for r in rows if r.get("learned")]
    outcomes = [test(r) for r in learned]
    hits = [o for o in outcomes if o is not None]  # testable seeds
    untestable = len(outcomes) - len(hits)
    numbers = {
        "seeds": len(rows),
        "swept_seeds": sum(not r.get("missing") for r in rows),
        "learned_seeds": len(learned),
        "passing_seeds": sum(hits),
        "untestable_seeds": untestable,
        "gap_pp": spread([r.get("gap_pp") for r in learned]),
        "period": [r.get("period") for r in learned],
        "period_p": [r.get("period_p") for r in learned],
        "mean_accuracy": spread([100 * r["mean_accuracy"] for r in learned if r.get("mean_accuracy") is not None]),
    }
    if claim == "same_window":
        numbers["same_window_gap_pp"] = spread([r.get("same_window_gap_pp") for r in learned])
    if len(learned) < MIN_SEEDS:
        missing = sum(bool(r.get("missing")) for r in rows)
        absent = f", {missing} without a checkpoint" if missing else ""
        verdict = "inconclusive"
        why = f"{len(learned)} of {len(rows)} seeds learned{absent} (a verdict needs {MIN_SEEDS} seeds that learned)"
    elif untestable and (all(hits) or not any(hits)):
        verdict = "inconclusive"
        why = f"{untestable} of {len(learned)} seeds not testable (p-value withheld by the analysis); {rule} on " + (
            f"{sum(hits)} of the {len(hits)} testable"
        )
    elif all(hits):
        verdict, why = "reproduced", f"{rule} on all {len(learned)} seeds"
    elif not any(hits):
        verdict, why = "not reproduced", f"{rule} on none of {len(learned)} seeds"
    else:
        testable = " testable" if untestable else ""
        verdict, why = "inconclusive", f"{rule} on {sum(hits)} of {len(hits)}{testable} seeds"
    return {"verdict": verdict, "why": why, **numbers}


def judge(rows: list[dict], matrix=MATRIX) -> dict[str, dict]:
    """claim -> {"claim", "verdict", "entries": {recipe: entry verdict}} over ``rows``: the plain
    sweeps, the kv-gaps 0,1 sweeps for the same-window claim."""
    out = {}
    for claim, text in CLAIMS.items():
        variant = "kv-gaps" if claim == "same_window" else "plain"
        judged = [r for r in rows if r.get("missing") or r.get("variant", "plain") == variant]  # missing: no checkpoint
        entries = {
            entry.recipe: entry_verdict([r for r in judged if r["recipe"] == entry.recipe], claim)
            for entry in matrix
            if claim in entry.claims
        }
        verdicts = [e["verdict"] for e in entries.values()]
        if not verdicts:
            overall = "inconclusive"
        elif all(v == "reproduced" for v in verdicts):
            overall = "reproduced"
        elif any(v == "not reproduced" for v in verdicts):
            overall = "not reproduced"
        else:
            overall = "inconclusive"
        out[claim] = {"claim": text, "verdict": overall, "entries": entries}
    return out
