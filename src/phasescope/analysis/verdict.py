"""The verdict: one plain reading of a run's metrics, the first thing `analyze`, report.html and
`compare` show, and metrics.json's ``verdict``.

It says only what the statistics support: the drift-adjusted, bias-corrected gap with its
interval and p-value, the worst and best phase on the drift-adjusted scale (raw when the drift
could not be modelled, and said so), the detected period; "no detectable phase effect" with
the upper end of the interval when nothing is claimed ("no phase effect claimed" when the gap's
interval excludes 0 but its test does not survive the adjustment below: the words never deny
what an interval shows); at the ceiling or the floor the same
reading in the log-prob margin (``log_score``), since accuracy cannot move there.

**One claim, one alpha.** The verdict reads up to three tests -- the gap (a shared phase
effect), the period over offsets, and the per-content phase dependence (contents that each have
their own bad phase) -- and claims whatever passes. Each spends alpha on its own, so reading
all three would claim *something* in up to 3 alpha of null sweeps; the verdict therefore claims
only what passes Holm's step-down adjustment over the tests that were made (``claims``,
``adjusted_p``), which keeps the rate of any false claim at alpha. The factor tests
(``analysis/factors.py``: the needle's, the prompt end's, the distance's phase) join the same
family wherever the design moves two or more of them apart (``factor:NAME``), and every
between-contents comparison of a factor the design holds; when one of them is claimed the verdict
leads with it ("where the phase lives: ...", kind ``factor``). There the family is weighted
(``verdict_weights``): each factor test gets an equal share of alpha and the phase
statistics one share between them, so the prompt end is not tested at a sixth of alpha because the
needle's phase has four tests of its own. The raw p-values stay
beside their intervals (an interval excludes 0 exactly when its raw p < alpha), and a raw p
below alpha that the adjustment does not keep is said as such.
"""

from __future__ import annotations

import math

from phasescope.analysis.factors import design_words, reading
from phasescope.analysis.offset_effects import MIN_CONTENTS
from phasescope.analysis.pvalue import p_cell, p_text
from phasescope.phases import lengths_words

ALPHA = 0.05
MIN_VARYING = MIN_CONTENTS  # contents whose answers change with the offset that accuracy's tests need


def holm(p_values: dict, weights: dict | None = None) -> dict:
    """Holm-adjusted p-values of the tests that were made (None: not made, left out of the family).
    ``weights`` (default equal): the weighted Holm procedure, each test's share of alpha in
    proportion to its weight among the tests not yet rejected; any fixed weights keep the rate of
    any false claim at alpha."""
    made = {name: p for name, p in p_values.items() if p is not None}
    weight = {name: (weights or {}).get(name, 1.0) for name in made}
    remaining = sum(weight.values())
    adjusted, running = {}, 0.0
    for name in sorted(made, key=lambda name: (made[name] / weight[name], name)):
        running = max(running, min(1.0, made[name] * remaining / weight[name]))
        adjusted[name] = running
        remaining -= weight[name]
    return adjusted


def verdict_weights(m: dict) -> dict[str, float]:
    """Each test's share of the verdict's alpha. Where the design tells factors apart, every factor
    test (the needle's, the prompt end's, the distance's, each between-contents comparison) gets an
    equal share, and the phase statistics (gap, period, multiple, dependence) one share between
    them -- so the prompt end is not tested at a sixth of alpha because the needle's phase has four
    tests of its own (experiments/factor_power.py measures both families, nulls included)."""
    tests = {name: p for name, p in verdict_tests(m).items() if p is not None}
    factors = [name for name in tests if name.startswith("factor:")]
    phase = [name for name in tests if name not in factors]
    if not factors:
        return dict.fromkeys(tests, 1.0)
    shares = len(factors) + bool(phase)
    return dict.fromkeys(factors, 1.0 / shares) | dict.fromkeys(phase, 1.0 / shares / max(len(phase), 1))


def verdict(m: dict, family: dict | None = None) -> dict:
    """metrics.json's ``verdict`` from the rest of ``m`` (``analyze_arrays``' output). ``family``:
    the adjusted p-values of this verdict's tests when they share alpha with other verdicts' (each
    task of a run of several, ``per_task``), and how to say so; None: Holm over its own tests.
    Every sentence ends with the prompt lengths it was measured at (``m["lengths"]``, when known)."""
    v = _log_score_verdict(m, bound, family) if (bound := _log_score_bound(m)) else _accuracy_verdict(m, family)
    if (lengths := m.get("lengths")) and v["sentence"]:
        v["sentence"] += f"; {lengths_words(lengths['min'], lengths['max'], lengths['bands'])}"
    return v


def _log_score_bound(m: dict) -> str | None:
    """Why the verdict reads the log-prob score instead of accuracy (None: it reads accuracy)."""
    accuracy = m["overall_accuracy"]
    if accuracy in (0.0, 1.0) and m.get("log_score"):
        return "ceiling" if accuracy == 1.0 else "floor"
    informative = m.get("n_informative_contents")
    score = m.get("log_score") or {}
    if informative is not None and informative < MIN_VARYING and score.get("gap_p_value") is not None:
        return "fixed answers"  # a random or frozen model: each content answers alike
    return None


def verdict_tests(m: dict) -> dict[str, float | None]:
    """The raw p-value of every test the verdict reads (None: not made), before any adjustment."""
    if _log_score_bound(m):
        s = m["log_score"]
        period = s.get("period") or {}
        return {"gap": s.get("gap_p_value"), "period": period.get("p_value"), "multiple": period.get("multiple_test_p")}
    dependence = m.get("phase_dependence") or {}
    period = m.get("period") or {}
    return {
        "gap": m.get("gap_p_value"),
        "period": period.get("p_value"),
        "multiple": period.get("multiple_test_p"),
        "dependence": dependence.get("p_value"),
    } | factor_tests(m)


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
        "claims": [],
        "adjusted_p": {},
    }


def _claim(v: dict, m: dict, family: dict | None) -> None:
    """Holm over this verdict's tests (weighted: ``verdict_weights``), or the adjustment of a larger
    family they belong to (``family``)."""
    tests = v["tested_p"] = verdict_tests(m)
    if family is None:
        weights = verdict_weights(m)
        v["adjusted_p"] = holm(tests, weights)
        shared = " (each factor an equal share)" if len(set(weights.values())) > 1 else ""
        v["family_words"] = f"the verdict's {len(v['adjusted_p'])} tests{shared}"
    else:
        v["adjusted_p"] = {name: family["adjusted_p"][name] for name, p in tests.items() if p is not None}
        v["family_words"] = family["words"]
    v["claims"] = [name for name in tests if v["adjusted_p"].get(name, 1.0) < ALPHA]


def factor_tests(m: dict) -> dict[str, float | None]:
    """The factor tests that join the verdict's family: each factor of a design that moves two or
    more apart (crossed), and every between-contents comparison of a held factor. A design that
    moves one group of factors tests it with the gap itself (``_factor_sentence``)."""
    factors = m.get("factors") or {}
    separable = len(factors.get("groups", [])) > 1
    return {
        f"factor:{t['name']}": t["p_value"] for t in factors.get("tests", []) if t["kind"] == "between" or separable
    }


def _factor_sentence(m: dict, v: dict) -> str:
    """'where the phase lives: ...' when the factors have something to add to the sentence."""
    factors = m.get("factors")
    if not factors:
        return ""
    adjusted = dict(v["adjusted_p"])
    groups = factors["groups"]
    main = "gap" in v["claims"] or "period" in v["claims"]
    if len(groups) == 1:  # the gap's test is this group's test
        for t in factors["tests"]:
            if t["kind"] == "within":
                adjusted[f"factor:{t['name']}"] = 0.0 if main else 1.0
    tied_claim = main and len(groups) == 1 and len(groups[0]) > 1
    between = any(t["kind"] == "between" and t["p_value"] is not None for t in factors["tests"])
    if len(groups) > 1 or between:
        return f"where the phase lives: {reading(factors, adjusted, m['step'], ALPHA)}"
    if tied_claim:  # the gap is this group's test: say only what the design could not tell apart
        tested = [t for t in factors["tests"] if t["kind"] == "within"]
        return "where the phase lives: " + design_words(factors, tested).removeprefix("; ")
    return ""


def _accuracy_verdict(m: dict, family: dict | None) -> dict:
    v = _base(m, "accuracy", "pp")
    adjusted = {r["phase"]: r["effect_pp"] for r in m["phases"] if r.get("effect_pp") is not None}
    raw = {r["phase"]: r["accuracy"] for r in m["phases"] if r.get("accuracy") is not None}
    _extremes(v, adjusted, raw, "raw accuracy", ".3f", "")
    v.update(effect=m.get("gap_pp"), effect_ci=m.get("gap_ci_pp"), p_value=m.get("gap_p_value"))
    dependence = m.get("phase_dependence") or {}
    _claim(v, m, family)
    v["period"] = _detected(m.get("period"), v)
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
            f"under 10 contents whose answers vary ({m.get('n_informative_contents')}; {_few_why(m)})"
        )
    else:
        tested = (m["gap_pp"], m["gap_ci_pp"], m["gap_p_value"], "pp", ".1f")
        v["kind"], v["sentence"] = _tested(*tested, m, v, dependence)
    if v["sentence"] and m.get("phase_of") == "end":
        v["sentence"] += " (phases of the prompt end: this design holds the needle)"
    if v["sentence"] and not accuracy_bound:
        factor = _factor_sentence(m, v)
        if factor and any(name.startswith("factor:") for name in v["claims"]):
            v["factor_kind"] = v["kind"]  # what the needle's phase statistics alone read
            v["kind"] = "factor"
            v["sentence"] = f"{factor}; {_phase_words(m)} alone{_mixed_in(m, v)}: {v['sentence']}"
        elif factor:
            v["sentence"] += f"; {factor}"
        v["sentence"] += _disagreement(m)
    return v


def _mixed_in(m: dict, v: dict) -> str:
    """Why the needle's own line may show an effect the factor tests place elsewhere: it is not
    adjusted for the other factors, and on uneven cells their effect leaks into it."""
    own = "end" if m.get("phase_of") == "end" else "needle"
    claimed = [name for name in v["claims"] if name.startswith("factor:")]
    if "gap" not in v["claims"] or any(own in name.removeprefix("factor:").split("+") for name in claimed):
        return ""
    cells = (m.get("factors") or {}).get("cells")
    if cells and cells["min"] != cells["max"]:
        return (
            f" (not adjusted for the other factors' phases, and their cells are uneven: {cells['min']} to "
            f"{cells['max']} records each, so part of the effect the factor tests place elsewhere shows in it)"
        )
    return " (not adjusted for the other factors' phases)"


def _phase_words(m: dict) -> str:
    return "the prompt end's phase" if m.get("phase_of") == "end" else "the needle's phase"


def _few_why(m: dict) -> str:
    """Why few contents vary: too few swept, or contents fixed at every offset (then more samples
    will not help: whatever fails does not move with this design's phase)."""
    fixed = m.get("fixed_contents") or {}
    wrong, right, n = fixed.get("always_wrong", 0), fixed.get("always_right", 0), fixed.get("n_contents", 0)
    if n < MIN_VARYING:
        return "raise --samples"
    parts = [f"{k} of {n} contents are {word} at every offset" for k, word in ((wrong, "wrong"), (right, "right")) if k]
    return "; ".join(parts) + ": whatever decides them does not move with this design's phase"


def _disagreement(m: dict) -> str:
    """Accuracy low while the right answer is the likeliest candidate: say why the two disagree."""
    margins = [r.get("mean_margin") for r in m.get("phases", []) if r.get("mean_margin") is not None]
    if not margins or m["overall_accuracy"] >= 0.5 or min(margins) <= 0:
        return ""
    return (
        f"; the log-prob margin favours the right answer at every phase (>= {min(margins):+.1f} nats) while "
        f"accuracy is {m['overall_accuracy']:.2f}: the margin compares the candidates only, and greedy decoding "
        "emits a token none of them continues with (e.g. candidates sharing a first token the model does not emit)"
    )


def _log_score_verdict(m: dict, bound: str, family: dict | None) -> dict:
    s = m["log_score"]
    v = _base(m, s["outcome"], "nats")
    adjusted = {r["phase"]: r["effect"] for r in s["phases"] if r.get("effect") is not None}
    means = {r["phase"]: r["mean"] for r in s["phases"] if r.get("mean") is not None}
    what = "log-prob margin" if s["outcome"] == "margin" else "log-prob of the right answer"
    _extremes(v, adjusted, means, f"the raw mean {what}", ".2f", " nats")
    v.update(kind=bound, effect=s.get("gap"), effect_ci=s.get("gap_ci"), p_value=s.get("gap_p_value"))
    _claim(v, m, family)
    v["period"] = _detected(s.get("period"), v)
    if bound == "fixed answers":
        head = (
            f"fixed answers: only {m.get('n_informative_contents')} contents change their answer with the offset, "
            f"too few for accuracy to show a phase effect; in the {what}"
        )
    else:
        word = "right" if bound == "ceiling" else "wrong"
        head = f"{bound}: every answer is {word}, so accuracy cannot show a phase effect; in the {what}"
    if s.get("gap") is None:
        return {**v, "sentence": f"{head} it is not tested either: {s.get('note')}"}
    if s.get("gap_p_value") is None:
        return {
            **v,
            "sentence": f"{head} the phases differ by {s['gap']:.2f} nats on these contents only ({s.get('note')})",
        }
    widest = max(abs(x) for x in s["gap_ci"])  # a tiny model's margins: hundredths would print 0.00 [0.00, 0.00]
    fmt = f".{1 - math.floor(math.log10(widest))}f" if 0 < widest < 0.01 else ".2f"
    tested = (s["gap"], s["gap_ci"], s["gap_p_value"], "nats", fmt)
    _, reading = _tested(*tested, {**m, "period": s["period"]}, v, {})
    return {**v, "sentence": f"{head}: {reading}"}


def span(gap: float, ci, unit: str, fmt: str) -> str:
    """'gap unit [low, high]', with the low end printed to as many digits as it takes to show it is
    above 0 when it is (a rejected gap is never printed as '[0.0, ...]')."""
    low = format(ci[0], fmt)
    if ci[0] > 0 and float(low) == 0:
        low = format(ci[0], ".1g")
    return f"{gap:{fmt}} {unit} [{low}, {ci[1]:{fmt}}]"


def _tested(gap, ci, p, unit, fmt, m, v, dependence) -> tuple[str, str]:
    """(kind, sentence) for a gap with an interval and a p-value, claiming only ``v['claims']``."""
    step, period = m["step"], m.get("period") or {}
    claims, gap_span = v["claims"], span(gap, ci, unit, fmt)
    detected, kind = main_period(period)
    if "period" in claims and kind == "other" and "multiple" not in claims:
        return "other period", (
            f"a period-{detected} pattern ({p_text(period['p_value'])}), not a step-phase effect at step "
            f"{step}; the step's phases differ by {gap_span} ({p_text(p)})"
        )
    if "gap" in claims:
        # "gap", as the line under it, metrics.json's gap_pp, compare's column and the null's wording call it
        text = f"phase effect at step {step}: gap {gap_span} ({p_text(p)}); worst phase {v['worst_phase']}, best phase "
        text += f"{v['best_phase']} ({v['phase_basis']}); {_period_words(period, v)}"
        return "effect", text + (f"; {v['raw_note']}" if v.get("raw_note") else "")
    if "period" in claims or "multiple" in claims:
        words = _period_words(period, v)  # "period 8 (a multiple of the step: ...)" or "period 4"
        named, _, detail = words.partition(" (")
        detail = f"({detail}" if detail else f"({p_text(period['p_value'])})"
        return "period", (
            f"a {named.replace('period ', 'period-')} pattern over offsets at step {step} {detail}, though the "
            f"phase gap alone is not {'claimed' if ci[0] > 0 else 'significant'}: {gap_span} "
            f"({p_text(p)}{_unclaimed(v, 'gap')})"
        )
    if "dependence" in claims:
        return "content-specific", (
            f"no shared phase effect{' claimed' if ci[0] > 0 else ''} at step {step} (gap {gap_span}, {p_text(p)}"
            f"{_unclaimed(v, 'gap')}), but each "
            f"content depends on the phase by {dependence['rms_pp']:.1f} pp [{dependence['ci_pp'][0]:.1f}, "
            f"{dependence['ci_pp'][1]:.1f}] ({p_text(dependence['p_value'])}), not on the same phase"
        )
    return "no effect", (
        f"no {'phase effect claimed' if ci[0] > 0 else 'detectable phase effect'} at step {step}: gap {gap_span} "
        f"({p_text(p)}{_unclaimed(v, 'gap')}); an effect above {ci[1]:{fmt}} {unit} is unlikely"
    )


def _unclaimed(v: dict, test: str) -> str:
    """A raw p below alpha that the verdict does not claim (it did not survive the adjustment)."""
    adjusted = v["adjusted_p"].get(test)
    if adjusted is None or adjusted < ALPHA or v["p_value"] is None or v["p_value"] >= ALPHA:
        return ""
    return f"; {p_cell(adjusted)} once {v['family_words']} share alpha (Holm)"


def _extremes(v: dict, adjusted: dict, raw: dict, what: str, fmt: str, unit: str) -> None:
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
            f"{what} is lowest at phase {raw_worst} ({raw[raw_worst]:{fmt}}{unit}; phase {worst}: "
            f"{raw.get(worst, float('nan')):{fmt}}{unit}), before the drift over offsets is removed"
        )


def main_period(period: dict) -> tuple[int | None, str | None]:
    """The period named among the step, its divisors and other periods (multiples of the step are a
    claim of their own); metrics of schema 4 before the split keep it in ``detected``."""
    if "base_detected" in period:
        return period.get("base_detected"), period.get("base_kind")
    return period.get("detected"), period.get("kind")


def _detected(period: dict | None, v: dict) -> int | None:
    if not period:
        return None
    if "multiple" in v["claims"]:
        return period.get("multiple_candidate") or period.get("detected")
    if period.get("p_value") is None or "period" not in v["claims"]:
        return None
    return main_period(period)[0] or None


def _period_words(period: dict, v: dict) -> str:
    if "multiple" in v["claims"]:
        tried = len(period.get("multiples_tried") or []) or 1
        return (
            f"period {period['detected']} (a multiple of the step: a pattern every {period['detected']} tokens "
            f"beyond the step's phases, {p_text(period['multiple_p'])}, {p_cell(period['multiple_test_p'])} over the "
            f"{tried} multiple{'s' if tried > 1 else ''} tried; the step's phases inside it, "
            f"{p_text(period['step_component_p'])})"
        )
    if period.get("p_value") is None:
        return "period not tested"
    detected = main_period(period)[0]
    if "period" in v["claims"] and detected:
        return f"period {detected}"
    return "no significant period"


def _bound(accuracy: float) -> str | None:
    return {1.0: "ceiling", 0.0: "floor"}.get(accuracy)
