"""What `phasescope analyze` prints, read as a person reads it at 80 columns: the verdict first,
a per-phase table whose intervals stay on one line, where metrics.json went."""

import io
import json
import re

import numpy as np
from typer.testing import CliRunner

from phasescope.cli import app
from phasescope.rundir.metrics import Metrics


def write_run(run, step=4, contents=40, offsets=24, bad_phase=0, seed=0):
    """records.jsonl of a simulated sweep: phase ``bad_phase`` 25 pp worse, a mild drift, two
    candidates per record (so the margin exists)."""
    rng = np.random.default_rng(seed)
    run.mkdir()
    lines = []
    for c in range(contents):
        ease = rng.normal(0, 0.8)
        for d in range(offsets):
            phase = d % step
            p = 1 / (1 + np.exp(-(0.6 + ease - 0.03 * d - 1.2 * (phase == bad_phase))))
            right = bool(rng.random() < p)
            lp = float(np.log(p)) if right else float(np.log(1 - p)) - 1.0
            # the other candidate below a right target (so no record contradicts its own answer)
            other = lp - 0.5 if right else min(float(np.log(p)) + 0.2, 0.0)  # a log-prob is <= 0
            record = {"content_id": c, "offset": d, "phase": phase, "step": step, "correct": right}
            lines.append(json.dumps(record | {"logprob_target": lp, "logprobs": {"right": lp, "wrong": other}}))
    (run / "records.jsonl").write_text("\n".join(lines) + "\n")
    return run


def analyze_output(run, columns=80) -> str:
    result = CliRunner().invoke(app, ["analyze", str(run), "--resamples", "199"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.output


def test_analyze_leads_with_the_verdict_and_its_table_fits_80_columns(tmp_path):
    tmp_path = tmp_path / ("a-directory-with-a-long-name-" * 3)  # the path alone is wider than 80 columns
    tmp_path.mkdir()
    out = analyze_output(write_run(tmp_path / "run"))
    lines = out.splitlines()
    assert lines[0].startswith("verdict: phase effect at step 4: gap ") and " (p = " in lines[0]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["verdict"]["worst_phase"] == 0 and "worst phase 0" in " ".join(out.split())
    rows = [line for line in lines if re.match(r"\s*\d[*<]*\s+\d+\s+0\.\d{3} \[0\.\d{3},\d", line)]
    assert len(rows) == 4  # one line per phase: every interval on its own row's line
    # every line fits, but the path's: a path is printed whole, to copy and paste (cli.app.say_path)
    assert all(len(line) <= 80 and "…" not in line for line in lines if not line.startswith("wrote "))
    assert re.match(r"\s*0<\s", rows[0]) and re.match(r"\s*3\*\s", rows[3])  # worst and boundary marked
    for row, phase in zip(rows, metrics["log_score"]["phases"], strict=True):
        low, high = phase["ci"]
        assert f"{phase['mean']:.2f} [{low:.2f},{high:.2f}]" in row  # the margin with its interval
    assert lines[-1] == f"wrote {tmp_path / 'run' / 'metrics.json'}"


def test_a_run_without_an_effect_is_read_as_none_detected(tmp_path):
    out = analyze_output(write_run(tmp_path / "run", bad_phase=None, seed=1))
    assert out.startswith("verdict: no detectable phase effect at step 4: gap ")
    assert "is unlikely" in out.splitlines()[0] + out.splitlines()[1]
    rows = [line for line in out.splitlines() if re.match(r"\s*\d[*<]*\s+\d+\s+0\.\d{3} \[0\.\d{3},\d", line)]
    assert len(rows) == 4 and not any("<" in row.split()[0] for row in rows)  # a lowest phase is not a worst one


def test_small_probabilities_are_written_in_scientific_notation_not_as_zero():
    """A code probe's answers often sit at 1e-5: three decimals would print 0.000 for both."""
    from phasescope.reporting.text import probability, probability_interval

    assert probability(3.24e-06) == "3.24e-06" and probability(0.4567) == "0.457"
    assert probability(0.0) == "0.000" and probability(None) == "not estimable"
    assert probability_interval((1e-6, 0.2)) == " [1.00e-06, 0.200]" and probability_interval((None, None)) == ""


def test_lm_eval_task_tables_keep_metric_names_whole_at_80_columns():
    """At 80 columns a task's table wraps each value's interval below it and never cuts a metric
    name (`exact_m…` twice, before)."""
    from rich.console import Console

    from phasescope.reporting.terminal import task_tables

    phases = [{"phase": p, "value": 0.5 + 0.01 * p, "ci": [0.41, 0.62]} for p in range(4)]
    metric = {"phases": phases, "gap_raw_pp": 3.0}
    per_task = {"ps_capitals": {"acc": metric | {"offset_0": 0.5}, "exact_match": metric | {"offset_0": 0.25}}}
    console = Console(width=80, record=True)
    for table in task_tables(per_task):
        console.print(table)
    text = console.export_text()
    assert "…" not in text and text.count("exact_match") == 1 and "0.620]" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_a_candidate_table_wider_than_80_columns_is_one_line_per_candidate_with_nothing_cut():
    """Four candidates at 1e-5 were cut to "7.03e-06 [6.52e-…" and "P(pair+…" (#46 part 8); a table
    too wide for the terminal is printed one line per candidate, every number whole."""
    from rich.console import Console

    from phasescope.analysis.stats import analyze_records
    from phasescope.reporting.terminal import probability_renderables

    rng = np.random.default_rng(0)
    records = []
    for c in range(12):
        for d in range(8):
            right = bool(rng.random() < 0.6)
            lp = -0.2 if right else -2.5
            others = {"pair+1": -11.9 + 0.1 * d, "pair+2": -11.5, "pair-1": -12.1 - 0.01 * c}
            records.append({"content_id": c, "offset": d, "phase": d % 4, "step": 4, "correct": right,
                            "logprob_target": lp, "logprobs": {"right": lp} | others})  # fmt: skip
    metrics = Metrics.from_json(analyze_records(records, n_resamples=100))
    for width, long in ((80, True), (200, False)):
        console = Console(width=width, record=True)
        for renderable in probability_renderables(metrics, width):
            console.print(renderable)
        text = console.export_text()
        assert "…" not in text and max(len(line) for line in text.splitlines()) <= width
        assert ("one line per candidate" in text) == long
        assert text.count("P(pair+1) [95%]") == (4 if long else 1)  # each phase's line, or the header
        assert all("e-06 [" in line and line.rstrip().endswith("]") for line in text.splitlines() if "e-06 [" in line)


def test_the_scoring_bar_fits_80_columns_at_any_rate():
    """Bars faster than 100 records/s wrapped at 80 columns (#59): the bar takes what the line leaves and
    the rate is at most five characters."""
    import time

    from rich.console import Console
    from rich.progress import Progress

    from phasescope.run.progress import rate_text, scoring_columns

    assert [rate_text(v) for v in (15.04, 123.4, 9999.0, 12345.0, 123456.0)] == ["15.0", "123", "9999", "12.3k", "123k"]
    console = Console(width=80, record=True, file=io.StringIO())
    bar = Progress(*scoring_columns(), console=console)
    task = bar.add_task("records", total=12288, completed=0, resumed_from=0)
    for done in (2000, 4000, 6000):
        bar.update(task, completed=done)
        time.sleep(0.02)  # a rate of about 100,000 records/s
    console.print(bar.make_tasks_table(bar.tasks))
    lines = console.export_text().splitlines()
    assert len(lines) == 1 and "6000/12288 records" in lines[0] and "rec/s" in lines[0] and "left" in lines[0], lines
