"""One verdict per task when a run holds several (an lm-eval run of ps_capitals,ps_phrases): the
pooled statistics mix one task's ``acc`` with another's ``exact_match`` and contents of unlike
difficulty, so each task is analyzed on its own records, as if swept alone (records only, no torch).
The same for each length band of a run swept at several ``--context-tokens`` (``per_band``): a
fault that appears only past a length threshold shows in the bands beyond it."""

from __future__ import annotations

from phasescope.rundir.records import Record


def per_task(records: list[Record], seed: int, n_resamples: int) -> dict | None:
    """{task: headline and verdict} for runs of two tasks or more; None otherwise."""
    return _per_part(records, lambda r: r.task, str, seed, n_resamples)


def per_band(records: list[Record], seed: int, n_resamples: int) -> dict | None:
    """{"4,096 tokens": headline and verdict} for runs of two length bands or more; None otherwise."""
    return _per_part(records, lambda r: r.context_tokens, band_label, seed, n_resamples)


def band_label(tokens: int) -> str:
    return f"{tokens:,} tokens"


def _per_part(records: list[Record], part_of, label, seed: int, n_resamples: int) -> dict | None:
    from phasescope.analysis.stats import analyze_records

    parts = list(dict.fromkeys(part_of(r) for r in records if part_of(r) is not None))
    if len(parts) < 2:
        return None
    out = {}
    for part in sorted(parts) if all(isinstance(p, int) for p in parts) else parts:
        mine = [r for r in records if part_of(r) == part]
        m = analyze_records(mine, seed=seed, n_resamples=n_resamples)
        out[label(part)] = {
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
