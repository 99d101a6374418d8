"""What `phasescope analyze` prints: the verdict first, then a per-phase table that fits 80
columns (every interval on one line), then the detail lines. Rich renderables only; torch-free."""

from __future__ import annotations

from rich import box
from rich.table import Table

from phasescope.reporting.text import (
    dependence_line,
    detected_worst,
    factor_line,
    gap_line,
    number,
    period_line,
    phase_margins,
    probability_line,
    probability_table,
    task_metric_tables,
    window_line,
)
from phasescope.rundir.metrics import Metrics


def tight(pair, fmt: str) -> str:
    """ "[low,high]": an interval in the fewest characters that still read plainly."""
    if pair is None or any(v is None for v in pair):
        return ""
    return f" [{pair[0]:{fmt}},{pair[1]:{fmt}}]"


def verdict_text(metrics: Metrics) -> str:
    """The one-sentence reading (metrics.json's ``verdict``), then each task's own in a run of several."""
    lines = [f"[bold]verdict:[/] {metrics.verdict.sentence}"]
    lines += [f"  [bold]{task}[/] ({t['metric']}): {t['verdict']}" for task, t in (metrics.per_task or {}).items()]
    lines += [f"  [bold]{band}[/]: {t['verdict']}" for band, t in (metrics.per_band or {}).items()]
    return "\n".join(lines)


def phase_table(metrics: Metrics, title: str) -> Table:
    """Per-phase accuracy (clustered interval), drift-adjusted accuracy and effect, and the log-prob
    margin with its interval where the run has one. * marks the boundary phase, < the worst (when
    the verdict found an effect)."""
    step = metrics.step
    worst = detected_worst(metrics)
    margins = phase_margins(metrics)
    outcome = metrics.log_score.outcome if metrics.log_score else "margin"
    table = Table(
        title=f"{title}: step {step}",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
        caption=_caption(),
        caption_justify="left",  # a paragraph, read as one: centred lines of a wrapped caption read as a poem
    )
    for col in ("phase", "n", "accuracy [95%]", "adj.", "effect pp [95%]", f"{outcome} [95%]"):
        table.add_column(col, justify="right", no_wrap=True)
    for r in metrics.phases:
        mark = ("*" if r.phase == step - 1 else "") + ("<" if r.phase == worst else "")
        ci = (r.ci_low, r.ci_high) if r.accuracy is not None else None
        table.add_row(
            f"{r.phase}{mark}",
            str(r.n),
            number(r.accuracy, missing="n/a") + tight(ci, ".3f"),
            number(r.adjusted_accuracy),
            number(r.effect_pp, "+.1f") + tight(r.effect_ci_pp, ".1f"),
            number(margins[r.phase][0], ".2f") + tight(margins[r.phase][1], ".2f"),
        )
    return table


def _caption() -> str:
    return (
        "* boundary phase, < worst; [95%] clustered by content (none under 10 contents); adj.: accuracy with the "
        "drift over offsets removed; effect: the phase minus the mean of all phases; margin: log p(right) - max "
        "log p(other), nats"
    )


def detail_lines(metrics: Metrics) -> list[str]:
    lines = [
        gap_line(metrics),
        period_line(metrics),
        dependence_line(metrics),
        window_line(metrics),
        factor_line(metrics),
    ]
    return [line for line in lines if line]


def probability_renderables(metrics: Metrics, width: int = 80) -> list:
    probabilities = probability_table(metrics)
    if probabilities is None:
        return []
    head, rows = probabilities
    keys = len(head) - len(metrics.candidate_probabilities["candidates"])  # phase, pad units, contents
    table = fitting_table("mean probability of each candidate per phase", head, rows, keys, width, "candidate")
    return [table, probability_line(metrics)]


def task_tables(per_task: dict, width: int = 80) -> list[Table]:
    """lm-eval tasks: each metric per phase, with its 95% interval by document, and at offset 0."""
    return [fitting_table(title, head, rows, 1, width, "column") for title, head, rows in task_metric_tables(per_task)]


def fitting_table(title: str, head: list[str], rows: list[list[str]], keys: int, width: int, what: str) -> Table:
    """``rows`` as they are when they fit ``width`` columns; else one line per (row, value column):
    the ``keys`` first columns, the value column's name (``what``) and its value, so no number or
    interval is cut ("7.03e-06 [6.52e-…") or broken over lines ("[0.000 , 0.000]")."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(head, *rows, strict=True)]
    if sum(widths) + 3 * len(head) <= width:
        table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
        for column in head:
            table.add_column(column, justify="right", no_wrap=True)
        for row in rows:
            table.add_row(*row)
        return table
    table = Table(title=title, caption=f"wider than {width} columns: one line per {what}",
                  caption_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)  # fmt: skip
    for column in [*head[:keys], what]:
        table.add_column(column, justify="left", overflow="fold")
    table.add_column("value [95%]", justify="right", no_wrap=True)
    for row in rows:
        for j, (name, value) in enumerate(zip(head[keys:], row[keys:], strict=True)):
            table.add_row(*(row[:keys] if j == 0 else [""] * keys), name, value, end_section=j == len(head) - keys - 1)
    return table
