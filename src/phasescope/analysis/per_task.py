"""One verdict per task when a run holds several (an lm-eval run of ps_capitals,ps_phrases): the
pooled statistics mix one task's ``acc`` with another's ``exact_match`` and contents of unlike
difficulty, so each task is analyzed on its own records, as if swept alone (records only, no torch)."""

from __future__ import annotations

from phasescope.rundir.records import Record


def per_task(records: list[Record], seed: int, n_resamples: int) -> dict | None:
    """{task: headline and verdict} for runs of two tasks or more; None otherwise."""
    from phasescope.analysis.stats import analyze_records

    tasks = list(dict.fromkeys(r.task for r in records if r.task is not None))
    if len(tasks) < 2:
        return None
    out = {}
    for task in tasks:
        mine = [r for r in records if r.task == task]
        m = analyze_records(mine, seed=seed, n_resamples=n_resamples)
        out[task] = {
            "metric": _judged_by(mine),
            "n_records": m["n_records"],
            "n_contents": m["n_contents"],
            "overall_accuracy": m["overall_accuracy"],
            "gap_pp": m["gap_pp"],
            "gap_ci_pp": m["gap_ci_pp"],
            "gap_p_value": m["gap_p_value"],
            "period": m["verdict"]["period"],
            "claims": m["verdict"]["claims"],
            "verdict": m["verdict"]["sentence"],
        }
    return out


def _judged_by(records: list[Record]) -> str:
    """The task metric ``correct`` was read from (the probe takes the first it reports)."""
    first = next((r.task_metrics for r in records if r.task_metrics), None)
    return next(iter(first)) if first else "correct"
