"""The verdict: one plain reading of a run's metrics, the first thing `analyze`, report.html and
`compare` show, and metrics.json's ``verdict``.

It says only what the statistics support: the drift-adjusted, bias-corrected gap with its
interval and p-value, the worst and best phase on the drift-adjusted scale (raw when the drift
could not be modelled, and said so), the detected period; "no detectable phase effect" with
the upper end of the interval when p >= alpha; at the ceiling or the floor the same reading in
the log-prob margin (``log_score``), since accuracy cannot move there.
"""

from __future__ import annotations

ALPHA = 0.05


def verdict(m: dict) -> dict:
    """metrics.json's ``verdict`` from the rest of ``m`` (``analyze_arrays``' output)."""
    accuracy = m["overall_accuracy"]
    if accuracy in (0.0, 1.0) and m.get("log_score"):
        return _log_score_verdict(m, "ceiling" if accuracy == 1.0 else "floor")
    return _accuracy_verdict(m)


def _base(m: dict, outcome: str, unit: str) -> dict:
    return {
        "kind": None,
        "sentence": None,
        "outcome": outcome,
        "unit": unit,
        "effect": None,
        "effect_ci": None,
        "p_value": None,
        "worst_phase": None,
        "best_phase": None,
        "phase_basis": None,
        "period": None,
        "boundary_phase": m["step"] - 1,
        "raw_note": None,
    }


def _accuracy_verdict(m: dict) -> dict:
    v = _base(m, "accuracy", "pp")
    adjusted = {r["phase"]: r["effect_pp"] for r in m["phases"] if r.get("effect_pp") is not None}
    raw = {r["phase"]: r["accuracy"] for r in m["phases"] if r.get("accuracy") is not None}
    _extremes(v, adjusted, raw)
    v.update(effect=m.get("gap_pp"), effect_ci=m.get("gap_ci_pp"), p_value=m.get("gap_p_value"))
    v["period"] = _detected(m.get("period"))
    step = m["step"]
    if accuracy_bound := _bound(m["overall_accuracy"]):
        v["kind"] = accuracy_bound
        v["sentence"] = f"{accuracy_bound}: every answer is {'right' if accuracy_bound == 'ceiling' else 'wrong'}, so "
        v["sentence"] += "accuracy cannot show a phase effect; the records carry no log-prob to measure it in instead"
    elif m.get("gap_pp") is None:
        v["kind"] = "withheld"
        raw_gap = m.get("gap_raw_pp")
        v["sentence"] = f"phase effect not tested at step {step}: {m.get('inference_note')}" + (
            f"; raw max-min {raw_gap:.1f} pp, drift not removed" if raw_gap is not None else ""
        )
    elif m.get("gap_p_value") is None:
        v["kind"] = "few contents"
        v["sentence"] = (
            f"phase gap {m['gap_pp']:.1f} pp at step {step} on these contents only: no interval or p-value "
            f"under 10 contents whose answers vary ({m.get('n_informative_contents')}; raise --samples)"
        )
    else:
        v["kind"], v["sentence"] = _tested(m["gap_pp"], m["gap_ci_pp"], m["gap_p_value"], "pp", ".1f", m, v)
    return v


def _log_score_verdict(m: dict, bound: str) -> dict:
    s = m["log_score"]
    v = _base(m, s["outcome"], "nats")
    adjusted = {r["phase"]: r["effect"] for r in s["phases"] if r.get("effect") is not None}
    means = {r["phase"]: r["mean"] for r in s["phases"] if r.get("mean") is not None}
    _extremes(v, adjusted, means)
    v.update(kind=bound, effect=s.get("gap"), effect_ci=s.get("gap_ci"), p_value=s.get("gap_p_value"))
    v["period"] = _detected(s.get("period"))
    word = "right" if bound == "ceiling" else "wrong"
    what = "log-prob margin" if s["outcome"] == "margin" else "log-prob of the right answer"
    head = f"{bound}: every answer is {word}, so accuracy cannot show a phase effect; in the {what}"
    if s.get("gap") is None:
        return {**v, "sentence": f"{head} it is not tested either: {s.get('note')}"}
    if s.get("gap_p_value") is None:
        return {
            **v,
            "sentence": f"{head} the phases differ by {s['gap']:.2f} nats on these contents only ({s.get('note')})",
        }
    _, reading = _tested(s["gap"], s["gap_ci"], s["gap_p_value"], "nats", ".2f", {**m, "period": s["period"]}, v)
    return {**v, "sentence": f"{head}: {reading}"}


def _tested(gap, ci, p, unit, fmt, m, v) -> tuple[str, str]:
    """(kind, sentence) for a gap with an interval and a p-value."""
    step, period = m["step"], m.get("period") or {}
    span = f"{gap:{fmt}} {unit} [{ci[0]:{fmt}}, {ci[1]:{fmt}}]"
    if period.get("kind") == "other" and period.get("p_value") is not None:
        return "other period", (
            f"a period-{period['detected']} pattern (p = {period['p_value']:.2g}), not a step-phase effect at step "
            f"{step}; the step's phases differ by {span} (p = {p:.2g})"
        )
    if p >= ALPHA:
        return "no effect", (
            f"no detectable phase effect at step {step}: gap {span} (p = {p:.2g}); an effect above "
            f"{ci[1]:{fmt}} {unit} is unlikely"
        )
    text = f"phase effect {span} at step {step} (p = {p:.2g}); worst phase {v['worst_phase']}, best phase "
    text += f"{v['best_phase']} ({v['phase_basis']}); {_period_words(period)}"
    return "effect", text + (f"; {v['raw_note']}" if v.get("raw_note") else "")


def _extremes(v: dict, adjusted: dict, raw: dict) -> None:
    """Worst and best phase on the drift-adjusted scale, else the raw one; a note when they disagree."""
    basis, values = ("drift-adjusted", adjusted) if len(adjusted) >= 2 else ("raw", raw)
    if len(values) < 2:
        return
    v["worst_phase"], v["best_phase"] = min(values, key=values.get), max(values, key=values.get)
    v["phase_basis"] = basis
    raw_worst = min(raw, key=raw.get) if len(raw) >= 2 else None
    if basis == "drift-adjusted" and raw_worst is not None and raw_worst != v["worst_phase"]:
        worst = v["worst_phase"]
        v["raw_note"] = (
            f"raw accuracy is lowest at phase {raw_worst} ({raw[raw_worst]:.3f}; phase {worst}: "
            f"{raw.get(worst, float('nan')):.3f}), before the drift over offsets is removed"
        )


def _detected(period: dict | None) -> int | None:
    if not period or period.get("p_value") is None:
        return None
    return period.get("detected") or None


def _period_words(period: dict) -> str:
    if period.get("p_value") is None:
        return "period not tested"
    return f"period {period['detected']}" if period.get("detected") else "no significant period"


def _bound(accuracy: float) -> str | None:
    return {1.0: "ceiling", 0.0: "floor"}.get(accuracy)
