"""Learned position preferences across the reproduction matrix (issue #12 part 2): per learned
compressed model, the Spearman rank correlation of its mean effective pooling weight per phase
with its per-phase accuracy, then their mean over models and seeds with a t interval."""

from __future__ import annotations

from pathlib import Path

from phasescope.results import current_metrics

# poolers with learned softmax weights over the window (mean pooling's weights are fixed)
LEARNED_POOLERS = ("scalar_gate", "channel_gate", "channel_gate (V4)")


def preference_rho(model_spec: str, run_dir: Path) -> float | None:
    from phasescope.inspect.preferences import compare_with_run, load_for_preferences, model_preferences, task_rows

    prefs = model_preferences(load_for_preferences(model_spec), task_rows(model_spec, 64, 0), seed=0)
    metrics = current_metrics(run_dir)
    return compare_with_run(prefs, metrics.phase_accuracy(), metrics.step)["rho"]


def add_preference_rhos(rows: list[dict]) -> None:
    """``preference_rho`` on every plain row of a learned model with a learned pooler (in place)."""
    for r in rows:
        if r.get("variant") == "plain" and r.get("learned") and r.get("pooler") in LEARNED_POOLERS:
            r["preference_rho"] = preference_rho(r["model"], Path(r["run_dir"]))


def pooled(rows: list[dict]) -> dict:
    """Mean of the per-model rhos with a t 95% interval over models and seeds."""
    from phasescope.analysis.intervals import t_summary

    rhos = [r["preference_rho"] for r in rows if r.get("preference_rho") is not None]
    s = t_summary(rhos)
    ci = None if s["ci_low"] is None else [s["ci_low"], s["ci_high"]]
    return {"n": s["n"], "mean": s["mean"], "ci": ci, "positive": sum(v > 0 for v in rhos)}
