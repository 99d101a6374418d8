"""One verdict per task when a run holds several (an lm-eval run of ps_capitals,ps_phrases): the
pooled statistics mix one task's ``acc`` with another's ``exact_match`` and contents of unlike
difficulty, so each task is analyzed on its own records, as if swept alone (records only, no torch).
The same for each length band of a run swept at several ``--context-tokens`` (``per_band``): a
fault that appears only past a length threshold shows in the bands beyond it."""

from __future__ import annotations

from phasescope.rundir.records import Record


def per_task(records: list[Record], seed: int, n_resamples: int) -> dict | None:
    """{task: headline and verdict} for runs of two tasks or more; None otherwise. The tasks'
    verdicts share alpha: every test of every task enters one Holm family, so a run of T tasks
    claims a false phase effect on any task in at most alpha of null runs, not in up to T alpha."""
    return _per_part(records, lambda r: r.task, str, seed, n_resamples, joint="task")


def per_band(records: list[Record], seed: int, n_resamples: int) -> dict | None:
    """{"4,096 tokens": headline and verdict} for runs of two length bands or more; None otherwise."""
    return _per_part(records, lambda r: r.context_tokens, band_label, seed, n_resamples)


def band_label(tokens: int) -> str:
    return f"{tokens:,} tokens"


def _per_part(records, part_of, label, seed: int, n_resamples: int, joint: str | None = None) -> dict | None:
    """Each part's own analysis; ``joint`` (what a part is called): the parts' verdicts adjusted as
    one family (``shared_alpha``), else each verdict at alpha on its own."""
    from phasescope.analysis.stats import analyze_records

    parts = list(dict.fromkeys(part_of(r) for r in records if part_of(r) is not None))
    if len(parts) < 2:
        return None
    ordered = sorted(parts) if all(isinstance(p, int) for p in parts) else parts
    analyses = {}
    for part in ordered:
        mine = [r for r in records if part_of(r) == part]
        analyses[label(part)] = (mine, analyze_records(mine, seed=seed, n_resamples=n_resamples))
    if joint:
        shared_alpha({name: m for name, (_, m) in analyses.items()}, joint)
    out = {}
    for name, (mine, m) in analyses.items():
        out[name] = {
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


def shared_alpha(analyses: dict[str, dict], what: str) -> None:
    """Re-read each analysis' verdict with Holm's adjustment over the tests of all of them (in place):
    each analysis has an equal share of alpha, divided among its tests as its own verdict divides it."""
    from phasescope.analysis.verdict import holm, verdict, verdict_tests, verdict_weights

    tests = {(name, test): p for name, m in analyses.items() for test, p in verdict_tests(m).items()}
    weights = {}
    for name, m in analyses.items():  # each task an equal share, divided as its own verdict divides it
        own = verdict_weights(m)
        weights |= {(name, test): w / sum(own.values()) for test, w in own.items()}
    adjusted = holm(tests, weights)
    words = f"the {len(adjusted)} tests of the {len(analyses)} {what}s' verdicts"
    for name, m in analyses.items():
        mine = {test: p for (owner, test), p in adjusted.items() if owner == name}
        m["verdict"] = verdict(m, family={"adjusted_p": mine, "words": words})


def _judged_by(records: list[Record]) -> str:
    """The task metric ``correct`` was read from (the probe takes the first it reports)."""
    first = next((r.task_metrics for r in records if r.task_metrics), None)
    return next(iter(first)) if first else "correct"
