"""One-line summaries of metrics.json, shared by `analyze`, `demo` and report.html."""

from __future__ import annotations


def number(value, fmt: str = ".3f", missing: str = "-") -> str:
    return missing if value is None else format(value, fmt)


def interval(pair, fmt: str = ".1f") -> str:
    return "" if pair is None else f" [{pair[0]:{fmt}}, {pair[1]:{fmt}}]"


def gap_line(metrics: dict) -> str:
    """The drift-adjusted gap with its interval and p-value, and the raw max - min beside it."""
    if metrics.get("gap_pp") is None:
        return f"phase gap not estimable: {metrics.get('inference_note')}"
    text = f"phase gap {metrics['gap_pp']:.1f} pp{interval(metrics['gap_ci_pp'])} (drift-adjusted"
    text += f"; raw max-min {metrics['gap_raw_pp']:.1f} pp)" if metrics.get("gap_raw_pp") is not None else ")"
    if metrics.get("gap_p_value") is not None:
        text += f", p = {metrics['gap_p_value']:.2g}; homogeneity p = {metrics['homogeneity_p_value']:.2g}"
    if metrics.get("inference_note"):
        text += f" ({metrics['inference_note']})"
    return text


def gap_title(metrics: dict) -> str:
    """Short form for figure titles."""
    if metrics.get("gap_pp") is None:
        return "phase gap not estimable"
    p = f", p = {metrics['gap_p_value']:.2g}" if metrics.get("gap_p_value") is not None else ""
    return f"drift-adjusted phase gap {metrics['gap_pp']:.1f} pp{interval(metrics['gap_ci_pp'])}{p}"


def period_line(metrics: dict) -> str:
    period = metrics["period"]
    if period.get("p_value") is None:
        return f"period: not tested ({period.get('note', 'no data')})"
    if period["detected"]:
        return f"detected period {period['detected']} (p = {period['p_value']:.2g})"
    return f"no significant period (p = {period['p_value']:.2g})"


def window_line(metrics: dict) -> str | None:
    """Same-window vs split-window at equal value phase, or why the geometry cannot tell."""
    w = metrics.get("windows")
    if not w:
        return None
    if not w.get("separable"):
        return f"same-window vs split-window: {w['note']}"
    text = f"same-window minus split-window at equal value phase {w['same_minus_split_pp']:+.1f} pp"
    text += interval(w.get("ci_pp"))
    text += f" (p = {w['p_value']:.2g})" if w.get("p_value") is not None else f" ({w.get('note', '')})"
    return text + f", format-adjusted; phases compared: {w['discordant_phases']}"


def flip_line(metrics: dict) -> str | None:
    """How often an answer changes when the content moves by less than one step."""
    f = metrics.get("flips")
    if not f:
        return None
    return (
        f"flip rate {f['flip_rate_pp']:+.1f} pp{interval(f.get('ci_pp'))} (answers that change when the "
        "content moves a step +-1, beyond moving it a whole step)"
    )


def probability_table(metrics: dict) -> tuple[list[str], list[list[str]]] | None:
    """Header and rows of the per-phase mean probability of each candidate (analyze, report.html);
    None when the records name no candidate in common (older metrics.json too)."""
    table = metrics.get("candidate_probabilities")
    if not table:
        return None
    names = table["candidates"]
    head = ["phase", "contents", *(f"P({name}) [95%]" for name in names)]
    rows = []
    for row in table["phases"]:
        boundary = " (boundary)" if row["phase"] == metrics["step"] - 1 else ""
        cells = [number(row["mean"][n], missing="not estimable") + interval(row["ci"][n], ".3f") for n in names]
        rows.append([f"{row['phase']}{boundary}", str(row["n_contents"]), *cells])
    return head, rows


def probability_line(metrics: dict) -> str | None:
    """How the candidate probabilities were computed, and what is missing from them."""
    table = metrics.get("candidate_probabilities")
    if not table:
        return None
    return f"candidate probabilities: {table['method']}" + (f"; {table['note']}" if table.get("note") else "")
