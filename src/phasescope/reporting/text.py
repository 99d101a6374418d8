"""One-line summaries of metrics.json, shared by `analyze`, `demo` and report.html."""

from __future__ import annotations

import json

from phasescope.analysis.pvalue import p_text
from phasescope.phases import FACTORS
from phasescope.rundir.metrics import Metrics


def number(value, fmt: str = ".3f", missing: str = "-") -> str:
    return missing if value is None else format(value, fmt)


def interval(pair, fmt: str = ".1f") -> str:
    """ " [low, high]", or nothing when there is no interval (too few contents, not estimable)."""
    if pair is None or any(v is None for v in pair):
        return ""
    return f" [{pair[0]:{fmt}}, {pair[1]:{fmt}}]"


def detected_worst(metrics: Metrics) -> int | None:
    """The worst phase, when the verdict found an effect (a null run has a lowest phase, not a worst one)."""
    v = metrics.verdict
    return v.worst_phase if "gap" in v.claims else None


def phase_margins(metrics: Metrics) -> dict[int, tuple[float | None, list | None]]:
    """Per phase the mean log-prob margin and its interval clustered by content (``log_score``);
    without it (no candidate to compare with): the plain mean margin, no interval."""
    if metrics.log_score:
        return {r.phase: (r.mean, r.ci) for r in metrics.log_score.phases}
    return {r.phase: (r.mean_margin, None) for r in metrics.phases}


def gap_line(metrics: Metrics) -> str:
    """The drift-adjusted, bias-corrected gap with its interval and p-value; the plug-in and raw
    max - min beside it; the notes (too few contents, a trend that cannot be separated, another
    period) after it."""
    m, raw = metrics, metrics.gap_raw_pp
    if m.gap_pp is None:
        text = f"phase gap: drift-adjusted value withheld ({m.inference_note})"
        return text + (f"; raw max-min {raw:.1f} pp, drift not removed" if raw is not None else "")
    text = f"phase gap {m.gap_pp:.1f} pp{interval(m.gap_ci_pp)} (drift-adjusted"
    if m.gap_p_value is not None:
        text += f", bias-corrected; plug-in max-min {m.gap_plugin_pp:.1f} pp"
    text += f"; raw max-min {raw:.1f} pp)" if raw is not None else ")"
    if m.gap_p_value is not None:
        text += f", {p_text(m.gap_p_value)}; homogeneity {p_text(m.homogeneity_p_value)}"
    if m.inference_note:
        text += f" ({m.inference_note})"
    return text


def gap_title(metrics: Metrics) -> str:
    """Short form for figure titles."""
    if metrics.gap_pp is None:
        return "drift-adjusted phase gap withheld"
    p = f", {p_text(metrics.gap_p_value)}" if metrics.gap_p_value is not None else ""
    return f"drift-adjusted phase gap {metrics.gap_pp:.1f} pp{interval(metrics.gap_ci_pp)}{p}"


def period_line(metrics: Metrics) -> str:
    """The detected period, flagged when it is not the step (or a divisor of it)."""
    period = metrics.period
    if period.p_value is None:
        return f"period: not tested ({period.note or 'no data'})"
    p = p_text(period.p_value)
    if period.kind == "other":
        return f"a period-{period.detected} pattern ({p}), not a step-phase effect (step {metrics.step})"
    if period.kind == "multiple":
        return f"detected period {period.detected} ({p}): {period.note}"
    unclaimed = None  # a multiple tested but not claimed: said, so its p is not read as a second period answer
    if period.multiple_test_p is not None and period.kind != "multiple":
        tried = ", ".join(map(str, period.multiples_tried or [])) or "none"
        unclaimed = f"multiples of the step tried ({tried}): {p_text(period.multiple_test_p)}, not claimed"
    if period.detected:
        notes = [n for n in (period.note, period.multiple_note if period.detected == metrics.step else None) if n]
        notes += [unclaimed] if unclaimed else []
        return f"detected period {period.detected} ({p})" + "".join(f"; {n}" for n in notes)
    return f"no significant period ({p})" + (f"; {period.note}" if period.note else "")


def dependence_line(metrics: Metrics) -> str | None:
    """How strongly each content's own answers depend on the phase (root mean square of its
    phase effects), next to the part every content shares."""
    d = metrics.phase_dependence
    if not d:
        return None
    if d.get("rms_pp") is None:
        return f"phase dependence per content: not estimable ({d['note']})"
    p = f"{p_text(d['p_value'])}; " if d.get("p_value") is not None else ""
    text = (
        f"phase dependence per content {d['rms_pp']:.1f} pp{interval(d.get('ci_pp'))} ({p}shared by all contents "
        f"{d['average_rms_pp']:.1f} pp): root mean square of each content's own phase effects, drift removed"
    )
    return text + (f" ({d['note']})" if d.get("note") else "")


def dependence_short(metrics: Metrics) -> str:
    """A few words for summaries (demo)."""
    d = metrics.phase_dependence or {}
    if d.get("rms_pp") is None:
        return ""
    return f"; per-content phase dependence {d['rms_pp']:.1f} pp{interval(d.get('ci_pp'))}"


def window_line(metrics: Metrics) -> str | None:
    """Same-window vs split-window at equal value phase, or why the geometry cannot tell."""
    w = metrics.windows
    if not w:
        return None
    if not w.get("separable"):
        return f"same-window vs split-window: {w['note']}"
    text = f"same-window minus split-window at equal value phase {w['same_minus_split_pp']:+.1f} pp"
    text += interval(w.get("ci_pp"))
    text += f" ({p_text(w['p_value'])})" if w.get("p_value") is not None else f" ({w.get('note', '')})"
    return text + f", format-adjusted; phases compared: {w['discordant_phases']}"


def factor_line(metrics: Metrics) -> str | None:
    """The phase by factor: each factor's range over its phases and p (within or between contents),
    and what the design held."""
    f = metrics.factors
    if not f or not f.get("tests"):
        return None
    parts = []
    for t in f["tests"]:
        name = " or ".join(FACTORS[m].short for m in t["members"])
        if t.get("period") and t["period"] != metrics.step:
            name += f" mod {t['period']}"
        where = ", between contents" if t["kind"] == "between" else ""
        p = p_text(t["p_value"]) if t.get("p_value") is not None else (t.get("note") or "not tested")
        size = f"{t['range_pp']:.1f} pp" if t.get("range_pp") is not None else "-"
        if t.get("range_ci_pp"):
            size += " [{:.1f}, {:.1f}]".format(*t["range_ci_pp"])
        parts.append(f"{name} {size} ({p}{where})")
    held = [FACTORS[k].short + f" at phase {v}" for k, v in (f.get("held") or {}).items() if v is not None]
    header = "by factor (max - min of each factor's phase effects in the factor model, plug-in, not the gap above): "
    return header + "; ".join(parts) + (f"; held: {', '.join(held)}" if held else "")


def probability_table(metrics: Metrics) -> tuple[list[str], list[list[str]]] | None:
    """Header and rows of the per-phase mean probability of each candidate (analyze, report.html);
    None when the records name no candidate in common."""
    table = metrics.candidate_probabilities
    if not table:
        return None
    names, answers = table["candidates"], table.get("answers") or {}
    padded = any("pad_units" in row for row in table["phases"])
    unit = f"{table['pad_unit']!r} count" if table.get("pad_unit") else "pad units"
    labels = [f"P({n} {json.dumps(answers[n])}) [95%]" if n in answers else f"P({n}) [95%]" for n in names]
    head = ["phase", *([unit] if padded else []), "contents", *labels]
    rows = []
    for row in table["phases"]:
        boundary = " (boundary)" if row["phase"] == metrics.step - 1 else ""
        cells = [probability(row["mean"][n]) + probability_interval(row["ci"][n]) for n in names]
        counts = [unit_counts(row.get("pad_units") or [])] if padded else []
        rows.append([f"{row['phase']}{boundary}", *counts, str(row["n_contents"]), *cells])
    return head, rows


def unit_counts(counts: list[int], shown: int = 6) -> str:
    """The pad-unit counts seen at a phase: all of them when few (the study's table), else the range."""
    if not counts:
        return "-"
    if len(counts) <= shown:
        return ", ".join(map(str, counts))
    return f"{counts[0]}-{counts[-1]} ({len(counts)} counts)"


SMALL_PROBABILITY = 0.0005  # below this, 3 decimals would print 0.000: scientific notation instead


def probability(value) -> str:
    """A probability: 3 decimals, or 2 significant digits when it is small (a code probe's answers
    often sit at 1e-5, which 0.000 would hide)."""
    if value is None:
        return "not estimable"
    return f"{value:.2e}" if 0 < value < SMALL_PROBABILITY else f"{value:.3f}"


def probability_interval(pair) -> str:
    if pair is None or any(v is None for v in pair):
        return ""
    return f" [{probability(pair[0])}, {probability(pair[1])}]"


def probability_line(metrics: Metrics) -> str | None:
    """How the candidate probabilities were computed, and what is missing from them."""
    table = metrics.candidate_probabilities
    if not table:
        return None
    return f"candidate probabilities: {table['method']}" + (f"; {table['note']}" if table.get("note") else "")


def task_metric_tables(per_task: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    """lm-eval tasks (metrics.json's ``task_metrics``): per task a title, a header and rows of each
    metric at offset 0 (lm-eval's own number) and per phase with its 95% interval by document."""
    tables = []
    for task, metrics in per_task.items():
        phases = [f"phase {p['phase']}" for p in next(iter(metrics.values()))["phases"]]
        head = ["metric", "offset 0", *phases, "max-min pp (raw)"]
        rows = [
            [
                metric,
                value_ci(summary["offset_0"], None),
                *(value_ci(p["value"], p["ci"]) for p in summary["phases"]),
                number(summary["gap_raw_pp"], ".1f"),
            ]
            for metric, summary in metrics.items()
        ]
        tables.append((f"lm-eval task {task}: its metrics per phase (offset 0 = lm-eval's own rendering)", head, rows))
    return tables


def value_ci(value, ci) -> str:
    if value is None:
        return "not estimable"
    return f"{value:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def duration(seconds: float) -> str:
    """3 s, 4.2 min, 2.5 h."""
    if seconds < 90:
        return f"{seconds:.0f} s" if seconds >= 1 else f"{seconds:.2f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


PAGE_STYLE = (  # report.html and compare.html: readable from 400 px (tables scroll, figures scale, commands wrap)
    "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 8px}"
    "p,li,code,summary{overflow-wrap:anywhere}"  # a long path or command breaks anywhere rather than stick out
    "table{border-collapse:collapse;display:block;overflow-x:auto;max-width:100%}"
    "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
    "figure{display:inline-block;margin:4px;max-width:100%}"
    "img{max-width:100%;height:auto}pre{background:#f6f6f6;padding:8px;white-space:pre-wrap;overflow-wrap:anywhere}"
    ".verdict{font-size:1.15em;background:#f3f6fb;border-left:4px solid #4a6fa5;padding:8px 12px}"
    # a table (or a figure on a phone) wider than the page shows a shadow on the side it scrolls to
    "table,figure{background:linear-gradient(to right,#fff 30%,#fff0),linear-gradient(to left,#fff 30%,#fff0) 100% 0,"
    "radial-gradient(farthest-side at 0 50%,#0003,#0000),radial-gradient(farthest-side at 100% 50%,#0003,#0000) 100% 0;"
    "background-repeat:no-repeat;background-size:40px 100%,40px 100%,14px 100%,14px 100%;"
    "background-attachment:local,local,scroll,scroll}"
    # on a phone a figure scales to the screen: figures are drawn at most ~560 px wide, legends below
    # the axes, so at 400 px their text stays at 60% or more of its drawn size and nothing is off-screen
    "@media (max-width:640px){figure{display:block;margin:4px 0}}"
)


def page_head(title: str) -> str:
    """The opening of a self-contained page: charset, viewport, title (escaped), the shared style."""
    import html

    return (
        '<!doctype html>\n<html><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{PAGE_STYLE}</style></head><body>"
    )
