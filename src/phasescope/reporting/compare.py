"""``phasescope compare``: several sweep runs side by side in one self-contained compare.html —
a per-phase table with one column per run, accuracy over offsets overlaid, the phase gaps as a
forest plot.

It reads each run's metrics.json, kept current by ``phasescope.api.compared_runs`` (recomputed
there as ``report`` does: missing, stale, of an older schema or edited by hand).
"""

from __future__ import annotations

import base64
import html
import json
import shlex
from dataclasses import dataclass
from pathlib import Path

from phasescope.analysis.pvalue import p_cell, p_text
from phasescope.errors import InputError
from phasescope.reporting.factor_figure import departures_heatmap
from phasescope.reporting.figures import gap_forest, offset_overlay
from phasescope.reporting.text import interval, number, page_head
from phasescope.rundir import COMPARE_PAGE, FIGURES, PAIRED, RunDir
from phasescope.rundir.files import atomic_write_text
from phasescope.rundir.metrics import Metrics

# not offset_accuracy.png: DIR may be one of the runs, whose report figures must survive
FIGURE_NAMES = ("compare_offset_accuracy.png", "compare_gaps.png")
CAPTION = (
    "accuracy [95% CI clustered by content; none below 10 contents]; * the run's boundary phase (step - 1); "
    "blank: the run has no such phase; gap: max - min phase effect with the drift over offsets modelled, "
    "bias-corrected; verdict: the run's reading (ceiling/floor: accuracy cannot move, read in log-prob margin)"
)


@dataclass(frozen=True)
class ComparedRun:
    label: str
    run_dir: Path
    metrics: Metrics  # the run's current metrics.json


def run_labels(paths: list[Path], labels: list[str] | None) -> list[str]:
    """One label per run: ``labels`` in order, else each directory's name; none empty, no two alike."""
    if labels:
        if len(labels) != len(paths):
            raise InputError(
                f"{len(labels)} labels for {len(paths)} runs; give one --label per run, in the order of the runs "
                "(or none: each run is then named after its directory)"
            )
        names = [str(label) for label in labels]
    else:
        names = [path.resolve().name or str(path) for path in paths]
    seen: dict[str, Path] = {}
    for name, path in zip(names, paths, strict=True):
        if not name.strip():
            raise InputError(f"the label of {path} is empty; give it a name with --label NAME")
        if name in seen:
            raise InputError(
                f"two runs have the label {name!r} ({seen[name]} and {path}); labels must tell the runs apart: "
                "pass --label NAME once per run, in order"
            )
        seen[name] = path
    return names


def offset_curve(run: ComparedRun) -> tuple[list[int], list[float], list[int | None]]:
    """Accuracy and the needle's phase at each offset (metrics.json is current: ``compared_runs``
    recomputes an older one); the phase is None where an offset holds several."""
    m = run.metrics
    return list(m.offsets), list(m.accuracy_by_offset), list(m.phase_by_offset or [None] * len(m.offsets))


def phase_cell(metrics: Metrics, phase: int, compact: bool = False) -> str:
    """Accuracy with its interval (clustered by content); blank when the run's step has no such phase.
    ``compact`` (the console): two decimals, the interval without spaces or leading zeros."""
    step = metrics.step
    if phase >= step:
        return ""
    row = {r.phase: r for r in metrics.phases}.get(phase)
    if row is None or row.accuracy is None:
        return "n/a"
    boundary = "*" if phase == step - 1 else ""
    if compact:
        ci = "" if row.ci_low is None else f" [{_short(row.ci_low)},{_short(row.ci_high)}]"
        return f"{row.accuracy:.2f}{ci}{boundary}"
    return f"{row.accuracy:.3f}{interval((row.ci_low, row.ci_high), '.3f')}{boundary}"


def _short(value: float) -> str:
    """0.556 -> .56; 1.0 -> 1.0 (an accuracy bound in four characters)."""
    return "1.0" if value >= 0.995 else f"{value:.2f}".removeprefix("0")


def period_cell(metrics: Metrics) -> str:
    period = metrics.period
    if period.p_value is None:
        return "not tested"
    other = " (not the step)" if period.kind == "other" else ""
    return f"{period.detected or 'none'}{other} ({p_text(period.p_value)})"


def comparison_table(runs: list[ComparedRun], compact: bool = False) -> tuple[list[str], list[list[str]]]:
    """Header and rows of text, shared by compare.html and the console (``compact``: cells that
    keep three runs inside 80 columns): the verdict, phases up to the largest step, then one row
    per summary statistic."""
    ms = [run.metrics for run in runs]
    head = ["", *(run.label for run in runs)]
    rows = [
        ["verdict", *(verdict_cell(m) for m in ms)],
        ["step", *(str(m.step) for m in ms)],
        ["contents x offsets", *(f"{m.n_contents} x {len(m.offsets)}" for m in ms)],
    ]
    rows += [[f"phase {p}", *(phase_cell(m, p, compact) for m in ms)] for p in range(max(m.step for m in ms))]
    rows += [
        ["accuracy", *(f"{m.overall_accuracy:.3f}" for m in ms)],
        [
            "gap pp [95%]",
            *(number(m.gap_pp, ".1f", missing="withheld") + _interval(m.gap_ci_pp, compact) for m in ms),
        ],
        ["gap p", *(p_cell(m.gap_p_value) for m in ms)],
        ["period", *(period_cell(m) for m in ms)],
    ]
    return head, rows


def _interval(pair, compact: bool) -> str:
    if compact and pair is not None and None not in pair:
        return f" [{pair[0]:.1f},{pair[1]:.1f}]"
    return interval(pair)


def verdict_cell(metrics: Metrics) -> str:
    """The verdict's kind in a word or two (its sentence is printed under the table)."""
    return metrics.verdict.kind or "?"


def rich_table(runs: list[ComparedRun]):
    """The comparison table for the console (``phasescope compare``, ``phasescope demo``)."""
    from rich import box
    from rich.table import Table

    head, rows = comparison_table(runs, compact=True)
    table = Table(title="phasescope compare", caption=CAPTION, caption_justify="left", box=box.SIMPLE_HEAD,
                  show_edge=False, pad_edge=False)  # fmt: skip
    table.add_column(head[0], no_wrap=True)
    for col in head[1:]:
        table.add_column(col, justify="right", no_wrap=True)
    for row in rows:
        table.add_row(*row)
    return table


def run_notes(runs: list[ComparedRun]) -> list[str]:
    """What differs between the runs and would mislead a side-by-side reading (probes, steps,
    bootstrap counts), then each run's caveats (too few contents, every record right ...)."""
    notes = mixed_notes(runs)
    # a run at the ceiling or floor is said once, by mixed_notes: its own note says the same
    notes += [
        f"{run.label}: {note}" for run in runs if (note := run.metrics.inference_note) and not _bounded(run.metrics)
    ]
    return notes


def mixed_notes(runs: list[ComparedRun]) -> list[str]:
    notes = []
    lacking = [run.label for run in runs if not RunDir(run.run_dir).spec.exists()]
    if lacking:
        notes.append(
            f"{', '.join(lacking)} {'has' if len(lacking) == 1 else 'have'} no spec.json (lost or deleted): the probe "
            "and its options cannot be read, so the runs cannot be shown to be one task; restore it (manifest.json "
            "holds the command that made it)"
        )
    specs = {run.label: RunDir(run.run_dir).read_sweep() for run in runs if run.label not in lacking}
    probes = {label: spec.probe_name or "unknown probe" for label, spec in specs.items()}
    designs = {label: spec.design for label, spec in specs.items()}
    if len(set(probes.values())) > 1:
        named = ", ".join(f"{label}: {probe_label(spec)}" for label, spec in specs.items())
        notes.append(f"the runs use different probes ({named}): their accuracies are different tasks, not levels")
    elif len(set(designs.values())) > 1:  # one task placed two ways: its levels compare, its phases mean other things
        named = ", ".join(f"{label}: {design or 'no design'}" for label, design in designs.items())
        notes.append(
            f"the runs place the same probe with different designs ({named}): one task, so their accuracies compare, "
            "but each design moves other tokens with the offset, so their phase effects measure different placements"
        )
    steps = {run.label: run.metrics.step for run in runs}
    if len(set(steps.values())) > 1:
        named = ", ".join(f"{label}: {step}" for label, step in steps.items())
        notes.append(f"the runs have different steps ({named}): each run's phases are counted mod its own step")
    resamples = {run.label: run.metrics.n_resamples for run in runs}
    if len(set(resamples.values())) > 1:
        named = ", ".join(f"{label}: {n or 'unknown'}" for label, n in resamples.items())
        notes.append(
            f"the runs' p-values come from different bootstrap counts ({named}); the smallest p each can show differs"
        )
    bounded = [f"{run.label} ({run.metrics.verdict.kind})" for run in runs if _bounded(run.metrics)]
    if bounded:
        notes.append(
            f"at the ceiling or floor: {', '.join(bounded)}; accuracy cannot move there, so its gap is not a null "
            "result (its verdict reads the log-prob margin instead)"
        )
    return notes


def _bounded(metrics: Metrics) -> bool:
    return metrics.verdict.kind in ("ceiling", "floor")


def probe_label(spec) -> str:
    """A run's probe (and design, where the probe has designs) from its spec.json."""
    return (spec.probe_name or "unknown probe") + (f" ({spec.design})" if spec.design else "")


def forest_rows(runs: list[ComparedRun]) -> list[tuple[str, float | None, list[float] | None]]:
    rows = []
    for run in runs:
        gap, ci, p = run.metrics.gap_pp, run.metrics.gap_ci_pp, run.metrics.gap_p_value
        label = run.label + (f" ({p_text(p)})" if p is not None else "")
        if _bounded(run.metrics):  # a gap of 0 at the ceiling is no evidence of no effect
            label += f" ({run.metrics.verdict.kind}: cannot move)"
        elif gap is not None and ci is None:  # too few contents: the dot stands alone, the label says why
            label += " (no interval)"
        rows.append((label, gap, ci))
    return rows


def write_compare(runs: list[ComparedRun], out: Path, paired: dict | None = None) -> Path:
    """Figures in ``out/figures`` and the self-contained ``out/compare.html`` (figures embedded);
    ``paired`` (``results.paired``): its sentence and cells on the page, the whole in paired.json."""
    out.mkdir(parents=True, exist_ok=True)
    if paired is not None:
        atomic_write_text(out / PAIRED, json.dumps(paired, indent=1, allow_nan=False) + "\n")
    offsets_png, gaps_png = (out / FIGURES / name for name in FIGURE_NAMES)
    offset_overlay({run.label: offset_curve(run) for run in runs}, offsets_png)
    gap_forest(forest_rows(runs), gaps_png)
    images = [(path.name, base64.b64encode(path.read_bytes()).decode()) for path in (offsets_png, gaps_png)]
    departures = out / FIGURES / "departures_by_cell.png"
    if paired is not None and departures_heatmap(paired, departures):  # the paired section's own figure
        paired = paired | {"figure": base64.b64encode(departures.read_bytes()).decode()}
    page = out / COMPARE_PAGE
    atomic_write_text(page, _page(runs, images, out, paired))
    return page


def paired_rows(paired: dict) -> tuple[list[str], list[list[str]]]:
    """The paired comparison's cells: needle phase, prompt-end phase, records, departures each way."""
    a, b = paired["names"]
    head = ["needle phase", "end phase", "records", f"{b} wrong, {a} right", f"{b} right, {a} wrong"]
    rows = [
        [str(c["needle_phase"]), "-" if c["end_phase"] is None else str(c["end_phase"]), str(c["n"]),
         str(c["b_wrong_a_right"]), str(c["b_right_a_wrong"])]
        for c in paired["cells"]
    ]  # fmt: skip
    return head, rows


def _paired_section(paired: dict | None) -> str:
    if paired is None:
        return ""
    head, rows = paired_rows(paired)
    header = "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    figure = paired.get("figure")
    image = (
        f'<figure><img alt="departures_by_cell.png" src="data:image/png;base64,{figure}"></figure>' if figure else ""
    )
    return (
        f'<h2>Record by record</h2><p class="verdict">{html.escape(paired["sentence"])}</p>{image}'
        f'<div class="scroll"><table>{header}{body}</table></div>'
    )


def _table(runs: list[ComparedRun]) -> str:
    head, rows = comparison_table(runs)
    cells = "".join(
        "<tr>" + f"<th>{html.escape(row[0])}</th>" + "".join(f"<td>{html.escape(c)}</td>" for c in row[1:]) + "</tr>"
        for row in rows
    )
    header = "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"
    return f"<table>{header}{cells}</table><p>{html.escape(CAPTION)}</p>"


def _runs_list(runs: list[ComparedRun]) -> str:
    """Where each run came from: its directory, model, probe and design, the sweep command."""
    items = []
    for run in runs:
        spec, manifest = RunDir(run.run_dir).read_sweep(), RunDir(run.run_dir).read_manifest()
        text = f"{run.label}: {run.run_dir}; model: {spec.model or '?'}; probe: {probe_label(spec)}"
        command = f"<br><code>{html.escape(manifest['command'])}</code>" if manifest.get("command") else ""
        items.append(f"<li>{html.escape(text)}{command}</li>")
    return "<ul>" + "".join(items) + "</ul>"


def _page(runs: list[ComparedRun], images: list[tuple[str, str]], out: Path, paired: dict | None = None) -> str:
    figures = "".join(f'<figure><img alt="{n}" src="data:image/png;base64,{b}"></figure>' for n, b in images)
    notes = "".join(f"<li>{html.escape(line)}</li>" for line in run_notes(runs))
    reproduce = shlex.join(
        ["phasescope", "compare", *(["--paired"] if paired else []), *(str(run.run_dir) for run in runs)]
        + [arg for run in runs for arg in ("--label", run.label)]
        + ["--out", str(out)]
    )
    verdicts = "".join(
        f'<p class="verdict"><b>{html.escape(run.label)}:</b> {html.escape(run.metrics.verdict.sentence or "")}</p>'
        for run in runs
    )
    return f"""{page_head(f"phasescope compare: {', '.join(run.label for run in runs)}")}
<h1>phasescope compare</h1>{verdicts}{_paired_section(paired)}<h2>Runs</h2>{_runs_list(runs)}
<h2>Per-phase accuracy and phase statistics</h2>{_table(runs)}
{f"<h2>Notes</h2><ul>{notes}</ul>" if notes else ""}
<h2>Figures</h2>{figures}
<h2>Reproduce</h2><pre>{html.escape(reproduce)}</pre>
</body></html>
"""
