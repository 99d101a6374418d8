"""Commands on run directories: analyze, export, report, compare."""

from __future__ import annotations

from pathlib import Path

import typer

from phasescope.cli.app import command, console, say_path, with_options
from phasescope.cli.gating import GATE_OPTIONS, finish_gate
from phasescope.errors import InputError
from phasescope.rundir import RunDir


@command()
def analyze(
    run_dir: str = typer.Argument(..., help="Run directory holding records.jsonl."),
    resamples: int = typer.Option(
        2000, min=100, max=100_000, help="Bootstrap resamples and permutations (100 to 100,000)."
    ),
) -> None:
    """Per-phase accuracy (raw and drift-adjusted), gap with interval and p-value, period, phase dependence,
    same-window contrast -> metrics.json (statistics from records.jsonl alone)."""
    from phasescope.api import analyze as run

    with console.status(f"analyzing {run_dir} ({resamples:,} bootstrap draws)"):
        metrics = run(run_dir, n_resamples=resamples)
    print_metrics(metrics, title=run_dir)
    if metrics.records_note:
        console.print(f"[yellow]note:[/] {metrics.records_note}", highlight=False)
    from phasescope.reporting.terminal import task_tables

    for table in task_tables(metrics.task_metrics or {}, console.width):
        console.print(table)
    say_path(f"wrote {RunDir(run_dir).metrics}")


@command()
def export(
    run_dir: str = typer.Argument(..., help="Run directory of `phasescope sweep`."),
    format: str = typer.Option(
        "csv",
        "--format",
        help="csv, parquet or jsonl: the records (lm-eval task and doc_id; prompt ids and text of a sweep run with "
        "--log-samples), per-phase, "
        "per-offset and task-metric tables, one file each; lm-eval: one results JSON shaped like lm-eval's "
        "(results[task][metric] at offset 0 plus phase_results[task][phase][metric]).",
    ),
    out: str = typer.Option(
        None,
        help="Where to write: a directory for tables (default RUN/export), a file for lm-eval (default "
        "RUN/lm_eval_results.json).",
    ),
) -> None:
    """The run's numbers as files for pandas, spreadsheets or lm-eval's tooling (needs phasescope\\[export])."""
    from phasescope.export import export as run

    for path in run(run_dir, format, out):
        say_path(f"wrote {path}")


def print_metrics(metrics, title: str) -> None:
    """The verdict, the per-phase table (80 columns) and the detail lines of `analyze` (``metrics``: a ``Metrics``)."""
    from phasescope.reporting.terminal import detail_lines, phase_table, probability_renderables, verdict_text

    console.print(verdict_text(metrics), highlight=False)
    console.print(phase_table(metrics, title))
    for line in detail_lines(metrics):
        console.print(line, highlight=False)
    for renderable in probability_renderables(metrics, console.width):
        console.print(renderable, highlight=False)


def print_paired(comparison: dict) -> None:
    from rich.table import Table

    from phasescope.reporting.compare import paired_rows

    head, rows = paired_rows(comparison)
    table = Table(*head, title="record by record")
    for row in rows:
        if row[3] != "0" or row[4] != "0":  # cells without a departure would only repeat zeros
            table.add_row(*row)
    if table.row_count:
        console.print(table)
    console.print(f"[bold]paired[/]: {comparison['sentence']}", highlight=False)
    if comparison.get("left_out"):
        console.print(f"note: {comparison['left_out']} records of one run only were not compared", highlight=False)


@command()
def report(
    run_dir: str = typer.Argument(..., help="Run directory (analyzed first if metrics.json is missing)."),
) -> None:
    """Figures (figures/*.png) and one self-contained report.html."""
    from phasescope.api import report as run

    with console.status(f"drawing the figures and report of {run_dir}"):
        path = run(run_dir)
    say_path(f"report: {path}")


def report_hint(out: str) -> None:
    """After writing a section file (ablation/preferences/theory.json) into a sweep run directory."""

    if RunDir(out).records.exists():
        console.print(f"{out} is a sweep run: `phasescope report {out}` adds this to its report.html", soft_wrap=True)


COMPARE_OPTIONS = {
    "runs": (
        list[str],
        typer.Argument(
            ..., help="Run directories (the --out of `phasescope sweep`); meant for two or more, one works too."
        ),
    ),
    "out": (str, typer.Option(..., help="Directory for compare.html and its figures (created if needed).")),
    "label": (
        list[str] | None,
        typer.Option(
            None,
            "--label",
            help="Name of a run in the table and figures; repeat once per run, in order (default: directory names).",
        ),
    ),
    "paired": (
        bool,
        typer.Option(
            False,
            "--paired",
            metavar="",
            help="Two runs of one sweep on identical items (A then B, e.g. a reference model and a served stack): "
            "pair them record by record, test whether and where B departs from A (each factor at every candidate "
            "period, each length band), compare the right answer's log-probs, and exit as diff does: 0 when B does "
            "not depart beyond the thresholds, 1 when it does, 2 on an error (DIR/paired.json, gate.json, "
            "junit.xml, summary.md, reproducers/). Refused, naming the first difference, unless every prompt and "
            "candidate is the same token for token.",
        ),
    ),
    **GATE_OPTIONS,
}


@command()
@with_options(COMPARE_OPTIONS)
def compare(runs, out, label, paired, reference_free, max_departures, alpha, logprob_tol, junit, summary_md) -> None:
    """Several sweep runs side by side -> DIR/compare.html (self-contained): per-phase accuracy with
    intervals clustered by content, one column per run; gap, p and period; accuracy over offsets overlaid; gaps
    as a forest plot. A run's metrics.json is recomputed first when missing or stale, as by `report`.
    --paired A B: the two runs record by record, as a regression gate (exit 0 same, 1 B departs, 2 error)."""

    from phasescope.api import compared_runs
    from phasescope.reporting.compare import rich_table, run_notes, write_compare
    from phasescope.rundir.owner import claim_out

    if reference_free and not paired:
        raise InputError("--reference-free compares one run with the known answers record by record: add --paired")
    claim_out(out, "phasescope compare", may_hold=("comparison",))
    comparison = decided = None
    if paired:
        from phasescope.gate import Thresholds
        from phasescope.results import gate

        thresholds = Thresholds(max_departures, alpha, logprob_tol)
        with console.status("pairing the runs record by record"):
            comparison, decided = gate(runs, out, label, thresholds, reference_free=reference_free)
    with console.status(f"reading {len(runs)} runs (analyzing those whose metrics are missing or stale)"):
        compared = compared_runs(runs, label)
    path = write_compare(compared, Path(out), comparison)
    console.print(rich_table(compared))
    if comparison is not None:
        print_paired(comparison)
    for run in compared:
        if verdict := run.metrics.verdict.sentence:
            console.print(f"[bold]{run.label}[/]: {verdict}", highlight=False)
    for line in run_notes(compared):
        console.print(f"note: {line}", highlight=False)
    if len(compared) == 1 and not paired:
        console.print("note: one run, nothing to compare it with (compare is meant for two or more)")
    say_path(f"compare: {path}")
    if decided is not None:
        finish_gate(decided, Path(out), junit, summary_md)
