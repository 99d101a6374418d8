"""One self-contained report.html: figures embedded, metrics table, the optional sections of
reporting/sections.py (ablation.json, preferences.json, theory.json), spec, how to reproduce."""

from __future__ import annotations

import html
import json
from pathlib import Path

from phasescope.reporting.answers import answers_section
from phasescope.reporting.factor_figure import FIGURE as FACTOR_FIGURE
from phasescope.reporting.factor_figure import GRID_FIGURE, factor_effects, needle_end_heatmap
from phasescope.reporting.figures import FIGURES, gap_forest
from phasescope.reporting.sections import figure_tag, optional_sections
from phasescope.reporting.spec_table import spec_rows
from phasescope.reporting.text import (
    dependence_line,
    detected_worst,
    factor_line,
    gap_line,
    interval,
    number,
    page_head,
    period_line,
    phase_margins,
    probability_line,
    probability_table,
    task_metric_tables,
    window_line,
)
from phasescope.rundir import FIGURES as FIGURE_DIR
from phasescope.rundir import RunDir
from phasescope.rundir.files import atomic_write_text
from phasescope.rundir.metrics import Metrics
from phasescope.rundir.saved import SavedSweep


def write_report(run_dir: Path, metrics: Metrics) -> Path:
    """report.html and its figures for the run in ``run_dir``, whose current metrics are ``metrics``."""
    spec = RunDir(run_dir).read_sweep()
    images = []
    for name, draw in FIGURES.items():
        path = run_dir / FIGURE_DIR / name
        draw(metrics, path)
        images.append(figure_tag(path))
    by_factor = run_dir / FIGURE_DIR / FACTOR_FIGURE
    if factor_effects(metrics, by_factor):  # the verdict's factor first; else beside the needle's phases
        at = 0 if metrics.verdict.kind == "factor" else 1
        images.insert(at, figure_tag(by_factor))
        grid = run_dir / FIGURE_DIR / GRID_FIGURE
        if needle_end_heatmap(metrics, grid):
            images.insert(at + 1, figure_tag(grid))
    for parts, of in ((metrics.per_band, "length band"), (metrics.per_task, "task")):  # #59 item 1: by band
        if parts:
            path = run_dir / FIGURE_DIR / f"gap_by_{of.replace(' ', '_')}.png"
            gap_forest([(name, t["gap_pp"], t["gap_ci_pp"]) for name, t in parts.items()], path, of=of)
            images.insert(0, figure_tag(path))  # the verdict reads each band (task) apart: its figure first
    page = _page(run_dir, metrics, spec, images)
    out = RunDir(run_dir).report
    atomic_write_text(out, page)
    return out


def _phase_table(metrics: Metrics) -> str:
    head = (
        "<tr><th>phase</th><th>n</th><th>accuracy</th><th>95% CI (by content)</th><th>drift-adjusted accuracy</th>"
        "<th>phase effect (pp) [95% CI]</th><th>mean log p</th><th>mean margin [95% CI]</th></tr>"
    )
    worst = detected_worst(metrics)
    margins = phase_margins(metrics)
    rows = []
    for r in metrics.phases:
        boundary = (" (boundary)" if r.phase == metrics.step - 1 else "") + (" (worst)" if r.phase == worst else "")
        margin, margin_ci = margins[r.phase]
        ci = interval((r.ci_low, r.ci_high), ".3f") if r.accuracy is not None else ""
        rows.append(
            f"<tr><td>{r.phase}{boundary}</td><td>{r.n}</td>"
            f"<td>{number(r.accuracy, missing='not estimable')}</td><td>{ci}</td>"
            f"<td>{number(r.adjusted_accuracy)}</td>"
            f"<td>{number(r.effect_pp, '+.1f')}{interval(r.effect_ci_pp)}</td>"
            f"<td>{number(r.mean_logprob)}</td><td>{number(margin)}{interval(margin_ci, '.3f')}</td></tr>"
        )
    return f"<table>{head}{''.join(rows)}</table>"


def _text_table(head: list[str], rows: list[list[str]]) -> str:
    """An HTML table of text cells (escaped)."""
    header = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    cells = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{header}</tr>{cells}</table>"


def _probability_table(metrics: Metrics) -> str:
    probabilities = probability_table(metrics)
    if probabilities is None:
        return ""
    return (
        "<h2>Mean probability of each candidate per phase</h2>"
        + _text_table(*probabilities)
        + f"<p>{html.escape(probability_line(metrics))}</p>"
    )


def _task_tables(metrics: Metrics) -> str:
    """lm-eval runs: each task's own metrics per phase (the accuracy table above pools the tasks)."""
    tables = task_metric_tables(metrics.task_metrics or {})
    if not tables:
        return ""
    out = [
        "<h2>lm-eval tasks: their own metrics per phase</h2><p>The per-phase accuracy above pools every task and "
        "scores each by its rule; these are each task's own metrics (acc, acc_norm, exact_match, ...) as lm-eval "
        "computes them, at offset 0 and per phase with a 95% interval by document.</p>"
    ]
    out += [f"<h3>{html.escape(title)}</h3>{_text_table(head, rows)}" for title, head, rows in tables]
    return "".join(out)


def _verdict(metrics: Metrics) -> str:
    """The one-sentence reading first."""
    tasks = "".join(
        f"<li><b>{html.escape(task)}</b> ({html.escape(t['metric'])}): {html.escape(t['verdict'])}</li>"
        for task, t in (metrics.per_task or {}).items()
    )
    tasks += "".join(
        f"<li><b>{html.escape(band)}</b>: {html.escape(t['verdict'])}</li>"
        for band, t in (metrics.per_band or {}).items()
    )
    pooled = f'<p class="verdict"><b>Verdict:</b> {html.escape(metrics.verdict.sentence)}</p>'
    return pooled + (f'<ul class="verdict">{tasks}</ul>' if tasks else "")


def _summary(metrics: Metrics) -> str:
    lines = [
        f"overall accuracy {metrics.overall_accuracy:.3f} over {metrics.n_records} records "
        f"({metrics.n_contents} contents x {len(metrics.offsets)} offsets)",
        gap_line(metrics),
        period_line(metrics),
    ]
    lines += [line for line in (dependence_line(metrics), window_line(metrics), factor_line(metrics)) if line]
    return "<ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in lines) + "</ul>"


METHOD = """<p>Each <i>content</i> (one needle, document or prompt) is placed at every offset, so its answer
takes every phase; contents are the independent units, and every interval is a 95% interval that
treats the records of one content as one unit (a wild bootstrap over contents, which stays
honest with a few dozen of them). Accuracy often drifts with the offset itself (a longer prompt,
a needle further away): the <i>drift-adjusted</i> numbers remove a smooth curve over offsets,
chosen from the data and checked, before the phases are compared, so a drift cannot pass for a
phase effect. The <i>gap</i> is the best minus the worst phase after that adjustment, corrected
for the upward bias a maximum minus a minimum has; the raw max-min is shown beside it. The
<i>period</i> test asks whether accuracy repeats over offsets with some period and which one
(the step's, or another); a verdict claims only what passes at one alpha over the tests it
reads. Details and the calibration that backs them: docs/sweeps.md, "Statistics".</p>"""


def _fit(metrics: Metrics) -> str:
    """The statistical model of this run, in the statistician's terms (under Method, not at the top)."""
    drift = f" Drift over offsets was fitted as a degree-{metrics.trend_degree} curve." if metrics.trend_degree else ""
    return f"<p>This run's fit: {html.escape(metrics.model)}.{drift}</p>"


GLOSSARY = """<details><summary>Words on this page</summary><dl>
<dt>phase</dt><dd>where the anchor (the needle's answer token) sits in its compression window:
(position &minus; align) mod step; the <i>boundary phase</i> (step &minus; 1) is a window's last token.</dd>
<dt>offset d</dt><dd>how far the content was shifted; each offset gives each content one phase.</dd>
<dt>drift-adjusted</dt><dd>with the smooth change of accuracy over offsets removed before the phases
are compared.</dd>
<dt>gap, bias-corrected, plug-in</dt><dd>the gap is the best minus the worst phase effect; the
<i>plug-in</i> max &minus; min of noisy estimates is too large on average (the same noise picks the
extreme phases and measures them); the <i>bias-corrected</i> gap picks them on one half of the
bootstrap-split estimate and measures them on the other; the <i>raw</i> max &minus; min leaves the
drift in.</dd>
<dt>homogeneity p</dt><dd>the test that all phase effects are zero (every phase alike); the gap's p
tests the largest difference only.</dd>
<dt>period</dt><dd>the number of tokens after which the pattern over offsets repeats; the step's
is the claim, a divisor or another period needs evidence beyond it.</dd>
<dt>pair@32</dt><dd>a distractor candidate: the value of the key&ndash;value pair at position 32 of
the prompt, scored beside the right answer.</dd>
<dt>shown part of 0&ndash;1</dt><dd>the strip beside a zoomed accuracy axis: the part of the whole
0&ndash;1 range the axis shows.</dd>
<dt>content</dt><dd>one needle, document or prompt, placed at every offset: the unit every interval
counts (its records are not independent of each other).</dd>
</dl></details>"""


def _page(run_dir: Path, metrics: Metrics, spec: SavedSweep, images: list[str]) -> str:
    figures = "".join(images)
    command = RunDir(run_dir).read_manifest().get("command")
    reproduce = (f"{command}\n" if command else "") + f"phasescope analyze {run_dir}\nphasescope report {run_dir}"
    return f"""{page_head(f"phasescope report: {run_dir}")}
<h1>phasescope report</h1><p>run directory: <code>{html.escape(str(run_dir))}</code>; step {metrics.step}</p>
{_verdict(metrics)}
{_summary(metrics)}
<h2>Per-phase accuracy</h2>{_phase_table(metrics)}
{_task_tables(metrics)}
{_probability_table(metrics)}
<h2>Figures</h2>{figures}{answers_section(run_dir, metrics)}{optional_sections(run_dir)}
<h2>Method</h2>{METHOD}{_fit(metrics)}{GLOSSARY}
<h2>What was swept</h2>{_text_table(["what", "value"], [list(row) for row in spec_rows(spec)])}
<details><summary>spec.json, every field</summary><pre>{html.escape(json.dumps(spec.raw, indent=2))}</pre></details>
<h2>Reproduce</h2><pre>{html.escape(reproduce)}</pre>
</body></html>
"""
