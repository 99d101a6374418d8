"""``phasescope compare``: several sweep runs side by side in one self-contained compare.html —
a per-phase table with one column per run, accuracy over offsets overlaid, the phase gaps as a
forest plot.

It reads each run's metrics.json, kept current by ``phasescope.api.compared_runs`` (recomputed
there as ``report`` does); records.jsonl only for a metrics.json written before it held the
accuracy at each offset.
"""

from __future__ import annotations

import base64
import html
import shlex
from dataclasses import dataclass
from pathlib import Path

from phasescope.analysis.records import RecordArrays
from phasescope.errors import InputError
from phasescope.recordfile import read_records
from phasescope.reporting.figures import gap_forest, offset_overlay
from phasescope.reporting.text import interval, number
from phasescope.runfiles import read_json

# not offset_accuracy.png: DIR may be one of the runs, whose report figures must survive
FIGURE_NAMES = ("compare_offset_accuracy.png", "compare_gaps.png")
CAPTION = (
    "accuracy [95% CI clustered by content; none below 10 contents]; * the run's boundary phase (step - 1); "
    "blank: the run has no such phase; adjusted gap: max - min phase effect with the drift over offsets "
    "modelled, bias-corrected"
)


@dataclass(frozen=True)
class ComparedRun:
    label: str
    run_dir: Path
    metrics: dict  # the run's current metrics.json


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


def offset_curve(run: ComparedRun) -> tuple[list[int], list[float]]:
    """Accuracy at each offset: from metrics.json, or from records.jsonl when the metrics were
    written before they held ``accuracy_by_offset``."""
    m = run.metrics
    if m.get("offsets") is not None and m.get("accuracy_by_offset") is not None:
        return list(m["offsets"]), list(m["accuracy_by_offset"])
    records = read_records(run.run_dir / "records.jsonl").records
    offsets, accuracy = RecordArrays.from_records(records).offset_means()
    return [int(d) for d in offsets], [float(a) for a in accuracy]


def phase_cell(metrics: dict, phase: int) -> str:
    """Accuracy with its interval (clustered by content); blank when the run's step has no such phase."""
    step = metrics["step"]
    if phase >= step:
        return ""
    row = {r["phase"]: r for r in metrics["phases"]}.get(phase)
    if row is None or row["accuracy"] is None:
        return "not estimable"
    boundary = "*" if phase == step - 1 else ""
    return f"{row['accuracy']:.3f}{interval((row['ci_low'], row['ci_high']), '.3f')}{boundary}"


def period_cell(metrics: dict) -> str:
    period = metrics.get("period") or {}
    if period.get("p_value") is None:
        return "not tested"
    other = " (not the step)" if period.get("kind") == "other" else ""
    return f"{period['detected'] or 'none'}{other} (p = {period['p_value']:.2g})"


def comparison_table(runs: list[ComparedRun]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of text, shared by compare.html and the console: phases up to the
    largest step, then one row per summary statistic."""
    ms = [run.metrics for run in runs]
    head = ["", *(run.label for run in runs)]
    rows = [
        ["step", *(str(m["step"]) for m in ms)],
        ["contents x offsets", *(f"{m['n_contents']} x {len(m['offsets'])}" for m in ms)],
    ]
    rows += [[f"phase {p}", *(phase_cell(m, p) for m in ms)] for p in range(max(m["step"] for m in ms))]
    rows += [
        ["overall accuracy", *(f"{m['overall_accuracy']:.3f}" for m in ms)],
        [
            "adjusted gap pp [95%]",
            *(number(m["gap_pp"], ".1f", missing="withheld") + interval(m.get("gap_ci_pp")) for m in ms),
        ],
        ["gap p", *(number(m.get("gap_p_value"), ".2g") for m in ms)],
        ["detected period", *(period_cell(m) for m in ms)],
    ]
    return head, rows


def rich_table(runs: list[ComparedRun]):
    """The comparison table for the console (``phasescope compare``, ``phasescope demo``)."""
    from rich.table import Table

    head, rows = comparison_table(runs)
    table = Table(title="phasescope compare", caption=CAPTION)
    table.add_column(head[0], no_wrap=True)
    for col in head[1:]:
        table.add_column(col, justify="right")
    for row in rows:
        table.add_row(*row)
    return table


def run_notes(runs: list[ComparedRun]) -> list[str]:
    """Each run's caveats (too few contents, every record right ...), one line per run that has any."""
    return [f"{run.label}: {run.metrics['inference_note']}" for run in runs if run.metrics.get("inference_note")]


def forest_rows(runs: list[ComparedRun]) -> list[tuple[str, float | None, list[float] | None]]:
    rows = []
    for run in runs:
        gap, ci, p = (run.metrics.get(key) for key in ("gap_pp", "gap_ci_pp", "gap_p_value"))
        label = run.label + (f" (p = {p:.2g})" if p is not None else "")
        if gap is not None and ci is None:  # too few contents: the dot stands alone, the label says why
            label += " (no interval)"
        rows.append((label, gap, ci))
    return rows


def write_compare(runs: list[ComparedRun], out: Path) -> Path:
    """Figures in ``out/figures`` and the self-contained ``out/compare.html`` (figures embedded)."""
    out.mkdir(parents=True, exist_ok=True)
    offsets_png, gaps_png = (out / "figures" / name for name in FIGURE_NAMES)
    offset_overlay({run.label: offset_curve(run) for run in runs}, offsets_png)
    gap_forest(forest_rows(runs), gaps_png)
    images = [(path.name, base64.b64encode(path.read_bytes()).decode()) for path in (offsets_png, gaps_png)]
    page = out / "compare.html"
    page.write_text(_page(runs, images, out))
    return page


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
        spec_path, manifest_path = run.run_dir / "spec.json", run.run_dir / "manifest.json"
        spec = read_json(spec_path, "sweep spec") if spec_path.exists() else {}
        manifest = read_json(manifest_path, "sweep manifest") if manifest_path.exists() else {}
        probe = spec.get("probe") or {}
        text = f"{run.label}: {run.run_dir}; model: {spec.get('model', '?')}; probe: {probe.get('probe', '?')}"
        text += f" ({probe.get('design', '?')})"
        command = f"<br><code>{html.escape(manifest['command'])}</code>" if manifest.get("command") else ""
        items.append(f"<li>{html.escape(text)}{command}</li>")
    return "<ul>" + "".join(items) + "</ul>"


def _page(runs: list[ComparedRun], images: list[tuple[str, str]], out: Path) -> str:
    figures = "".join(f'<figure><img alt="{n}" src="data:image/png;base64,{b}"></figure>' for n, b in images)
    notes = "".join(f"<li>{html.escape(line)}</li>" for line in run_notes(runs))
    reproduce = shlex.join(
        ["phasescope", "compare", *(str(run.run_dir) for run in runs)]
        + [arg for run in runs for arg in ("--label", run.label)]
        + ["--out", str(out)]
    )
    labels = html.escape(", ".join(run.label for run in runs))
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>phasescope compare: {labels}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}figure{{display:inline-block;margin:4px}}
pre{{background:#f6f6f6;padding:8px;overflow-x:auto}}</style></head><body>
<h1>phasescope compare</h1><h2>Runs</h2>{_runs_list(runs)}
<h2>Per-phase accuracy and phase statistics</h2>{_table(runs)}
{f"<h2>Notes</h2><ul>{notes}</ul>" if notes else ""}
<h2>Figures</h2>{figures}
<h2>Reproduce</h2><pre>{html.escape(reproduce)}</pre>
</body></html>
"""
