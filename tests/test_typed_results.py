"""Typed records and metrics: ``Record`` and ``Metrics`` read exactly what the files hold and
write it back unchanged, refuse what is malformed naming where, and are what every reader gets."""

import json

import numpy as np
import pytest

import phasescope
from phasescope.errors import InputError
from phasescope.results import current_metrics, metrics_digest
from phasescope.rundir.metrics import LogScore, MarginRow, Metrics, Period, PhaseRow, Verdict
from phasescope.rundir.records import Record, read_records

# a line as a sweep writes it (kv-retrieval), and the fields an lm-eval grade adds
SWEPT = {
    "content_id": 3, "offset": 5, "phase": 1, "step": 4, "align": 0, "anchor_pos": 41, "key_pos": 30,
    "value_pos": 31, "answer_pos": 41, "same_window": False, "variant": 1, "target": "right", "correct": True,
    "logprob_target": -0.25, "logprobs": {"right": -0.25, "d-1": -2.0, "d+1": None},
}  # fmt: skip
GRADED = {"task": "ps_capitals", "doc_id": 7, "generation": "Paris", "task_metrics": {"exact_match,none": 1.0}}


def test_a_swept_line_reads_and_writes_back_unchanged():
    line = json.dumps(SWEPT)
    record = Record.from_json(json.loads(line))
    assert json.dumps(record.to_json()) == line  # same keys, same order: a rewritten file keeps its digest
    assert record.line() == line + "\n"  # what the sweep appends and a repair rewrites
    assert record.key == (3, 5, 1) and record.logprobs["d+1"] is None and record.extra == {}


def test_grades_and_unknown_fields_are_kept():
    record = Record.from_json(SWEPT).with_fields(GRADED | {"my_tool_score": 0.5})
    assert (record.task, record.doc_id, record.task_metrics) == ("ps_capitals", 7, {"exact_match,none": 1.0})
    assert record.extra == {"my_tool_score": 0.5}
    assert Record.from_json(record.to_json()) == record
    assert record.to_json() == SWEPT | GRADED | {"my_tool_score": 0.5}


def test_an_older_record_gets_the_defaults_it_was_analyzed_with():
    old = {k: SWEPT[k] for k in ("content_id", "offset", "phase", "step", "correct", "logprob_target", "logprobs")}
    record = Record.from_json(old)
    assert (record.variant, record.target, record.same_window) == (0, "right", None)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"phase": 4}, "phase 4; a phase is an integer in \\[0, step=4\\)"),
        ({"correct": "yes"}, "field 'correct' must be true or false"),
        ({"logprob_target": float("nan")}, "field 'logprob_target' must be a log-probability"),
        ({"variant": -1}, "field 'variant' must be an integer >= 0"),
    ],
)
def test_a_malformed_record_is_refused_naming_the_line_and_field(tmp_path, change, message):
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(SWEPT) + "\n" + json.dumps(SWEPT | {"offset": 6} | change) + "\n")
    with pytest.raises(InputError, match=f"records.jsonl line 2: .*{message}"):
        read_records(path)


def planted_run(path, n_contents=24, offsets=16, step=4, seed=0):
    """A run directory whose records have a 30-point dip at phase 0."""
    rng = np.random.default_rng(seed)
    path.mkdir()
    lines = []
    for c in range(n_contents):
        for d in range(offsets):
            p = 0.5 if d % step == 0 else 0.8
            right = bool(rng.random() < p)
            lp = float(np.log(p if right else 1 - p))
            record = {"content_id": c, "offset": d, "phase": d % step, "step": step, "correct": right}
            lines.append(json.dumps(record | {"logprob_target": lp, "logprobs": {"right": lp, "wrong": lp - 0.5}}))
    (path / "records.jsonl").write_text("\n".join(lines) + "\n")
    return path


def test_metrics_are_typed_and_read_back_key_for_key(tmp_path):
    run = planted_run(tmp_path / "run")
    metrics = phasescope.analyze(run, n_resamples=200)
    assert isinstance(metrics, phasescope.Metrics) and isinstance(metrics.verdict, Verdict)
    assert phasescope.Metrics is Metrics and phasescope.Record is Record
    assert all(isinstance(row, PhaseRow) for row in metrics.phases) and metrics.step == 4
    assert isinstance(metrics.period, Period) and isinstance(metrics.log_score, LogScore)
    assert isinstance(metrics.log_score.period, Period) and isinstance(metrics.log_score.phases[0], MarginRow)
    assert metrics.period.detected == 4 and metrics.log_score.outcome == "margin"
    on_disk = json.loads((run / "metrics.json").read_text())
    assert metrics.to_json() == on_disk
    assert metrics_digest(metrics.to_json()) == on_disk["metrics_sha256"]
    assert Metrics.from_json(on_disk) == metrics == current_metrics(run)
    assert min(metrics.phase_accuracy(), key=metrics.phase_accuracy().get) == 0
    with pytest.raises(AttributeError):
        metrics.gap  # noqa: B018  (a misspelt statistic fails at once, never reads as None)


def test_metrics_missing_a_statistic_are_refused_naming_it():
    with pytest.raises(InputError, match=r"lacks \['gap_pp'\]; recompute it with `phasescope analyze RUN`"):
        Metrics.from_json({k: v for k, v in _some_metrics().items() if k != "gap_pp"})


def test_a_metrics_file_missing_a_statistic_is_recomputed(tmp_path):
    run = planted_run(tmp_path / "run")
    first = phasescope.analyze(run, n_resamples=200)
    body = {k: v for k, v in first.to_json().items() if k not in ("gap_pp", "metrics_sha256")}
    body["metrics_sha256"] = metrics_digest(body)  # self-consistent, yet not what this version writes
    (run / "metrics.json").write_text(json.dumps(body))
    recomputed = current_metrics(run)  # with the default bootstrap size: the bias correction moves a little
    assert recomputed.n_resamples == 2000 and recomputed.gap_pp == pytest.approx(first.gap_pp, abs=2)


def _some_metrics() -> dict:
    from phasescope.analysis.stats import analyze_records

    rng = np.random.default_rng(1)
    records = [
        {"content_id": c, "offset": d, "phase": d % 2, "step": 2, "correct": right,
         "logprob_target": -0.3 if right else -1.2, "logprobs": {"right": -0.3 if right else -1.2}}
        for c in range(6) for d in range(8) for right in [bool(rng.random() < 0.7)]
    ]  # fmt: skip
    return analyze_records(records, n_resamples=100)


def test_a_probes_own_contents_are_read_once_as_typed_values(tmp_path):
    """#45 item 1: spec.json's probe.contents (the code probe's and prompts' own) are parsed once
    into SavedSweep.contents, which the candidate table's answer texts are read from; a
    description that lists something else gives none, instead of each reader guarding it."""
    import json

    from phasescope.analysis.candidates import with_answers
    from phasescope.rundir import RunDir
    from phasescope.rundir.saved import SavedContent

    contents = [{"candidates": {"right": "8", "wrong": "32"}, "pad_unit": "="}] * 2
    (tmp_path / "spec.json").write_text(json.dumps({"schema": 2, "probe": {"probe": "code", "contents": contents}}))
    saved = RunDir(tmp_path).read_sweep()
    assert saved.contents == (SavedContent({"right": "8", "wrong": "32"}, "="),) * 2
    table = with_answers({"candidates": ["right", "wrong"]}, saved.contents)
    assert table["answers"] == {"right": "8", "wrong": "32"} and table["pad_unit"] == "="
    (tmp_path / "spec.json").write_text(json.dumps({"schema": 2, "probe": {"probe": "code", "contents": "x"}}))
    assert RunDir(tmp_path).read_sweep().contents == ()
