"""The gate's options and its ending, shared by `compare --paired` and `check` (phasescope/gate.py)."""

from __future__ import annotations

from pathlib import Path

import typer

from phasescope.cli.app import console, say_path

GATE_PANEL = "The gate (--paired, check)"

GATE_OPTIONS = {
    "reference_free": (
        bool,
        typer.Option(
            False,
            "--reference-free",
            metavar="",
            help="Compare one run with the known right answers (every record right; kv-retrieval, whose answer is "
            "in the prompt), so a stack is gated without a second endpoint (compare: with --paired and one run).",
            rich_help_panel=GATE_PANEL,
        ),
    ),
    "max_departures": (
        str,
        typer.Option(
            "0",
            metavar="N|P%",
            help="The gate fails when more records than this depart (answer or log-prob): a count (0: any "
            "departure fails, for a deterministic stack against the same weights) or a share of the records "
            "compared (0.5%).",
            rich_help_panel=GATE_PANEL,
        ),
    ),
    "alpha": (
        float,
        typer.Option(
            0.05,
            help="The gate also fails when the departure tests find B departing at this level (they also name "
            "the factor, period and length band the departures follow).",
            rich_help_panel=GATE_PANEL,
        ),
    ),
    "logprob_tol": (
        float,
        typer.Option(
            1.0,
            metavar="NATS",
            help="A record departs in log-prob when |log p_B(right) - log p_A(right)| is above this many nats "
            "(runs at the floor or the ceiling are compared this way).",
            rich_help_panel=GATE_PANEL,
        ),
    ),
    "junit": (
        str | None,
        typer.Option(
            None,
            metavar="FILE",
            help="Also write the JUnit XML here (it is always in DIR/junit.xml).",
            rich_help_panel=GATE_PANEL,
        ),
    ),
    "summary_md": (
        str | None,
        typer.Option(
            None,
            metavar="FILE",
            help="Append the Markdown summary to this file (e.g. $GITHUB_STEP_SUMMARY; always in DIR/summary.md).",
            rich_help_panel=GATE_PANEL,
        ),
    ),
}


def finish_gate(decided: dict, out: Path, junit: str | None, summary_md: str | None) -> None:
    """Print the gate's checks, copy its JUnit XML and Markdown where asked, and exit with its status."""
    from phasescope.gate import junit_xml, markdown
    from phasescope.rundir import GATE
    from phasescope.rundir.files import append_text, atomic_write_text

    for check in decided["checks"]:
        mark = "[green]pass[/]" if check["passed"] else "[bold red]FAIL[/]"
        console.print(f"{mark} {check['name']}: {check['message']}", highlight=False)
    reproducers = [Path(p) for p in decided.get("reproducers", [])]
    if reproducers:
        say_path(f"reproducers: {reproducers[0].parent} ({len(reproducers)}; phasescope replay FILE --model URL)")
    if junit:
        atomic_write_text(Path(junit), junit_xml(decided))
    if summary_md:
        append_text(Path(summary_md), markdown(decided, reproducers))
    verdict = "passed" if decided["passed"] else "FAILED"
    say_path(f"gate {verdict}: {out / GATE} (exit {decided['exit_code']})")
    raise typer.Exit(code=decided["exit_code"])
