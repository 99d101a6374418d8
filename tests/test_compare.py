"""`phasescope compare`: tiny planted runs side by side in one compare.html."""

import base64
import json
import re
import shutil

import pytest
from typer.testing import CliRunner

import phasescope
from phasescope.api import compared_runs, records_digest
from phasescope.backends import from_callable
from phasescope.cli import app
from phasescope.errors import InputError
from phasescope.reporting.compare import FIGURE_NAMES, forest_rows, offset_curve, rich_table, run_notes
from test_sweep import TASK, Planted


def sweep_run(out, step, bad_phase, samples):
    model = from_callable(Planted(step, bad_phase), vocab_size=TASK.vocab_size, step=step, align=0)
    phasescope.sweep(model, task=TASK, samples=samples, out=out, design="pad-prefix", offsets=range(12))
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three runs: step 4 (phase 3 bad, 12 contents), step 2 (phase 0 bad), step 4 always right;
    the last has no metrics.json yet, so compare must analyze it."""
    root = tmp_path_factory.mktemp("runs")
    made = [
        sweep_run(root / "s4", 4, 3, 12),
        sweep_run(root / "s2", 2, 0, 12),
        sweep_run(root / "full", 4, None, 6),
    ]
    for run in made[:2]:
        phasescope.analyze(run, n_resamples=300)
    return made


def table_rows(page: str) -> dict[str, list[str]]:
    """compare.html's table as {row name: cells, one per run}."""
    table = re.search(r"<table>(.*?)</table>", page, re.S).group(1)
    rows = [re.findall(r"<t[dh]>(.*?)</t[dh]>", row) for row in re.findall(r"<tr>(.*?)</tr>", table)]
    return {row[0]: row[1:] for row in rows}


def test_table_holds_each_runs_own_per_phase_accuracy(runs, tmp_path):
    page = phasescope.compare(runs, tmp_path / "cmp").read_text()
    rows = table_rows(page)
    assert rows[""] == ["s4", "s2", "full"]
    assert rows["step"] == ["4", "2", "4"]
    assert (runs[2] / "metrics.json").exists()  # the run without metrics was analyzed
    for i, run in enumerate(runs):
        metrics = json.loads((run / "metrics.json").read_text())
        for r in metrics["phases"]:
            boundary = "*" if r["phase"] == metrics["step"] - 1 else ""
            ci = "" if r["ci_low"] is None else f" [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"  # none below 10 contents
            expected = f"{r['accuracy']:.3f}{ci}{boundary}"
            assert rows[f"phase {r['phase']}"][i] == expected
        assert rows["accuracy"][i] == f"{metrics['overall_accuracy']:.3f}"
    # the planted effects themselves, so the cells are not just self-consistent
    assert rows["phase 3"][0].startswith("0.000") and rows["phase 0"][0].startswith("1.000")
    # 12 contents all right: contents are the units
    assert rows["phase 0"][1].startswith("0.000") and rows["phase 1"][1] == "1.000 [0.712, 1.000]*"
    # the step-2 run has no phases 2 and 3: blank cells, not zeros
    assert rows["phase 2"][1] == "" and rows["phase 3"][1] == ""
    assert rows["period"][0].startswith("4 (p = ") and rows["period"][1].startswith("2 (p = ")
    assert rows["verdict"] == ["effect", "effect", "ceiling"]
    s4 = json.loads((runs[0] / "metrics.json").read_text())
    assert rows["gap pp [95%]"][0] == f"{s4['gap_pp']:.1f} [{s4['gap_ci_pp'][0]:.1f}, " + (f"{s4['gap_ci_pp'][1]:.1f}]")
    assert "at the ceiling or floor: full (ceiling)" in page and "full: every record is right" not in page  # said once


def test_figures_exist_and_are_embedded(runs, tmp_path):
    page = phasescope.compare(runs[:2], tmp_path / "cmp", labels=["four", "two"]).read_text()
    for name in FIGURE_NAMES:
        data = (tmp_path / "cmp" / "figures" / name).read_bytes()
        assert data.startswith(b"\x89PNG")
        assert base64.b64encode(data).decode() in page
    assert re.findall(r'src="([^":]*)', page) == ["data", "data"]  # self-contained: no file links
    assert table_rows(page)[""] == ["four", "two"]
    assert "--label four --label two" in page  # the reproduce command


def test_stale_metrics_is_recomputed(runs, tmp_path):
    run = shutil.copytree(runs[0], tmp_path / "s4")
    lines = (run / "records.jsonl").read_text().splitlines(keepends=True)
    kept = [line for line in lines if json.loads(line)["content_id"] != 0]  # drop one content
    (run / "records.jsonl").write_text("".join(kept))
    page = phasescope.compare([run, runs[1]], tmp_path / "cmp").read_text()
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["records_sha256"] == records_digest(run / "records.jsonl")
    assert metrics["n_records"] == len(kept) < len(lines)
    assert table_rows(page)["contents x offsets"][0] == "11 x 12"


def test_a_metrics_file_of_an_older_schema_or_edited_by_hand_is_recomputed(runs, tmp_path):
    run = shutil.copytree(runs[1], tmp_path / "old")
    metrics = json.loads((run / "metrics.json").read_text())
    old = {k: v for k, v in metrics.items() if k not in ("verdict", "log_score", "schema", "metrics_sha256")}
    (run / "metrics.json").write_text(json.dumps(old))  # as written before the verdict existed
    (compared,) = compared_runs([run])
    assert compared.metrics.verdict.kind == "effect"
    edited = json.loads((run / "metrics.json").read_text()) | {"gap_pp": 99.0}
    (run / "metrics.json").write_text(json.dumps(edited))
    with pytest.warns(UserWarning, match="was changed after `phasescope analyze` wrote it"):
        (compared,) = compared_runs([run])
    assert compared.metrics.gap_pp == metrics["gap_pp"] != 99.0
    assert offset_curve(compared)[:2] == (metrics["offsets"], metrics["accuracy_by_offset"])


def test_the_console_table_fits_80_columns_and_notes_what_differs(runs):
    from rich.console import Console

    compared = compared_runs(runs)
    console = Console(width=80, record=True)
    console.print(rich_table(compared))
    lines = console.export_text().splitlines()
    table_lines = [line for line in lines if re.match(r"phase \d|gap pp", line)]
    assert len(table_lines) == 5 and all("…" not in line for line in lines)  # 4 phases + gap, nothing cut
    assert "[" in table_lines[0] and "]" in table_lines[0]  # the interval stays on its line
    notes = run_notes(compared)
    assert any(n.startswith("the runs have different steps (s4: 4, s2: 2, full: 4)") for n in notes)
    assert any("at the ceiling or floor: full (ceiling)" in n for n in notes)
    assert not any(n.startswith("full: every record is right") for n in notes)  # the ceiling said once
    assert not any("different probes" in n for n in notes)  # all three ran kv-retrieval pad-prefix
    assert "full (ceiling: cannot move)" in [label for label, _, _ in forest_rows(compared)]


def test_bad_inputs_are_clear_errors(runs, tmp_path):
    with pytest.raises(InputError, match="1 labels for 2 runs; give one --label per run"):
        phasescope.compare(runs[:2], tmp_path, labels=["a"])
    with pytest.raises(InputError, match="two runs have the label 'a'"):
        phasescope.compare(runs[:2], tmp_path, labels=["a", "a"])
    with pytest.raises(InputError, match="two runs have the label 's4'"):
        phasescope.compare([runs[0], runs[0]], tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(
        InputError, match=r"empty is not a sweep run directory: it has no records.jsonl; pass the --out"
    ):
        phasescope.compare([runs[0], tmp_path / "empty"], tmp_path / "cmp")
    with pytest.raises(InputError, match="does not exist"):
        phasescope.compare([runs[0], tmp_path / "typo"], tmp_path / "cmp")
    with pytest.raises(InputError, match="no run directory to compare"):
        phasescope.compare([], tmp_path / "cmp")
    with pytest.raises(InputError, match="must be lists"):
        phasescope.compare(str(runs[0]), tmp_path / "cmp")
    assert not (tmp_path / "cmp").exists()  # every check runs before anything is written


def test_cli_prints_the_table_and_refuses_bad_labels(runs, tmp_path):
    runner = CliRunner()
    args = ["compare", str(runs[0]), str(runs[1]), "--out", str(tmp_path / "cmp")]
    result = runner.invoke(app, [*args, "--label", "four", "--label", "two"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert "four" in result.output and "phase 3" in result.output and "compare.html" in result.output
    result = runner.invoke(app, [*args, "--label", "only-one"])
    assert result.exit_code == 2
    assert "error:" in result.output and "1 labels for 2 runs" in result.output and "Traceback" not in result.output
    result = runner.invoke(app, ["compare", "--help"], env={"COLUMNS": "200"})
    assert "--label" in result.output and "meant for two or more" in result.output


def test_pages_open_with_the_verdicts_and_fit_a_narrow_screen(runs, tmp_path):
    """report.html and compare.html: a viewport, tables that scroll, figures that scale, commands
    that wrap; compare.html says each run's verdict before anything else; no Python None on a page."""
    text = phasescope.compare(runs[:2], tmp_path / "cmp", labels=["four", "two"]).read_text()
    assert '<meta name="viewport"' in text and "white-space:pre-wrap" in text and "img{max-width:100%" in text
    assert text.index('class="verdict"><b>four:</b>') < text.index("<h2>Runs</h2>")
    report = phasescope.report(runs[0]).read_text()
    assert '<meta name="viewport"' in report and "None" not in report.split("<details>")[0]
    # the spec as a short table, spec.json folded below it; the statistics' words under Method
    swept = report.split("<h2>What was swept</h2>")[1].split("<details>")[0]
    assert "<td>offsets</td>" in swept and "<td>geometry</td>" in swept and "step 4" in swept
    assert "<summary>spec.json, every field</summary>" in report and '"schema"' not in report.split("<details>")[0]
    assert report.index("<h2>Method</h2>") > report.index('class="verdict"') and "drift-adjusted" in report


def test_a_run_without_spec_json_is_named_not_called_another_task(tmp_path):
    """Issue #57: B without spec.json read "the runs use different probes (... unknown probe)"."""
    import shutil

    from phasescope.reporting.compare import ComparedRun, run_notes

    a = tmp_path / "a"
    phasescope.sweep("src/phasescope/assets/demo/tiny-s4", samples=2, offsets=range(12), out=a)
    b = tmp_path / "b"
    shutil.copytree(a, b)
    (b / "spec.json").unlink()
    runs = [
        ComparedRun("a", a, phasescope.analyze(a, n_resamples=100)),
        ComparedRun("b", b, phasescope.analyze(b, n_resamples=100)),
    ]
    notes = " ".join(run_notes(runs))
    assert "b has no spec.json (lost or deleted)" in notes and "different probes" not in notes


def test_two_designs_of_one_probe_are_not_called_different_tasks(tmp_path):
    """#59: shift-needle and pad-prefix runs of kv-retrieval were noted as "different tasks, not levels"."""
    from phasescope.reporting.compare import ComparedRun, run_notes

    runs = []
    for design in ("shift-needle", "pad-prefix"):
        out = tmp_path / design
        phasescope.sweep("src/phasescope/assets/demo/tiny-s4", samples=2, offsets=range(12), design=design, out=out)
        runs.append(ComparedRun(design, out, phasescope.analyze(out, n_resamples=100)))
    notes = " ".join(run_notes(runs))
    assert "different probes" not in notes and "different tasks" not in notes
    assert "the same probe with different designs (shift-needle: shift-needle, pad-prefix: pad-prefix)" in notes
