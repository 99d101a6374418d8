"""Edited records are refused wherever a run is read (issue #44, 2): analyze, report, export,
load_run and compare --paired check each record against itself (target, log-probs) and against
the sweep that wrote it (spec.json); a missing or empty spec.json is named."""

from __future__ import annotations

import json
import shutil

import pytest

import phasescope
from phasescope.errors import InputError
from phasescope.results import paired
from phasescope.rundir.records import Record

DEMO = "src/phasescope/assets/demo/tiny-s4"


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    run = tmp_path_factory.mktemp("checks") / "run"
    phasescope.sweep(DEMO, samples=12, offsets=range(8), out=run)
    return run


def edited(swept, tmp_path, change) -> str:
    run = tmp_path / "run"
    shutil.copytree(swept, run)
    lines = (run / "records.jsonl").read_text().splitlines()
    record = json.loads(lines[3])
    change(record)
    lines[3] = json.dumps(record)
    (run / "records.jsonl").write_text("\n".join(lines) + "\n")
    (run / "metrics.json").unlink(missing_ok=True)
    return str(run)


def first_logprob(record):
    return next(iter(record["logprobs"]))


EDITS = {
    "offset outside the sweep": (lambda r: r.update(offset=99), "offset the sweep did not sweep (its offsets: 0..7)"),
    "content never drawn": (lambda r: r.update(content_id=999), "names a content the sweep did not draw"),
    "rendering never made": (lambda r: r.update(variant=7), "is rendering 7, but the sweep made 1"),
    "logprob_target edited": (lambda r: r.update(logprob_target=r["logprob_target"] - 1.0), "has logprob_target"),
    "target not a candidate": (lambda r: r.update(target="nowhere"), "which is not among its candidates"),
    "no log-probs": (lambda r: r.update(logprobs={}), "logprobs is empty"),
    "target's log-prob removed": (lambda r: r["logprobs"].pop("right"), "which is not among its candidates"),
    # the swept record at line 4 is right, its target above 1/2: flipped, its own log-probs contradict it
    "correct flipped": (lambda r: r.update(correct=False), "has correct false, but its target's log-prob"),
    "another candidate above 1/2": (
        lambda r: r.update(logprob_target=-3.0, logprobs=r["logprobs"] | {"right": -3.0, first_other(r): -0.1}),
        "has correct true, but another candidate is more likely than 1/2 and than the target",
    ),
    "same window where none can be": (
        lambda r: r.update(same_window=True),
        "has same_window true, but its key at 43 and value at 44 share no compression entry",
    ),
}


def first_other(record):
    return next(name for name in record["logprobs"] if name != record["target"])


@pytest.mark.parametrize("name", sorted(EDITS))
def test_an_edited_record_is_refused_by_every_reader(swept, tmp_path, name):
    change, said = EDITS[name]
    run = edited(swept, tmp_path, change)
    for read in (phasescope.analyze, phasescope.report, phasescope.load_run):
        with pytest.raises(InputError, match=said.replace("(", r"\(").replace(")", r"\)")):
            read(run)
    with pytest.raises(InputError, match="line 4"):
        phasescope.analyze(run)


def test_compare_paired_checks_both_runs_records(swept, tmp_path):
    run = edited(swept, tmp_path, lambda r: r.update(offset=99))
    with pytest.raises(InputError, match="did not sweep"):
        paired([swept, run], labels=["a", "b"])


@pytest.mark.parametrize("spec", ["deleted", "{}"])
def test_a_missing_or_empty_spec_is_named_with_what_can_still_be_read(swept, tmp_path, spec):
    run = tmp_path / "run"
    shutil.copytree(swept, run)
    if spec == "deleted":
        (run / "spec.json").unlink()
    else:
        (run / "spec.json").write_text(spec)
    (run / "metrics.json").unlink(missing_ok=True)
    note = phasescope.analyze(run).records_note
    state = "is missing" if spec == "deleted" else "is empty"
    assert f"spec.json {state}: the records cannot be checked against the sweep" in note
    assert "a partial run cannot be told from a finished one" in note


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"samples": "4"}, "samples must be an integer"),
        ({"samples": 4.5}, "samples must be an integer"),
        ({"samples": True}, "samples must be an integer"),
        ({"seed": 1.7}, "seed must be an integer"),
        ({"offsets": [0.5, 1]}, "offsets must be an integer"),
        ({"offsets": 5}, "offsets must be a list of integers or text like '0:24'"),
        ({"offsets": "0:x"}, "use start:stop"),
    ],
)
def test_the_python_api_refuses_what_the_command_line_refuses_naming_the_argument(given, said, tmp_path):
    """issue #44, 5: InputError naming the argument, never a raw TypeError."""
    with pytest.raises(InputError, match=said):
        phasescope.sweep(DEMO, **given, out=tmp_path / "run")


def test_the_python_api_takes_the_command_lines_offsets():
    run = phasescope.sweep(DEMO, samples=2, offsets="0:8")
    assert sorted({r.offset for r in run.records}) == list(range(8))


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["reproduce", "--seeds", "1000000"], "less than or equal to 100"),
        (["savings", "--bytes-per-value", "99999999999999999999"], "less than or equal to 8"),
        (
            ["sweep", "--model", DEMO, "--phase-ensemble", "--ensemble-pad-id", "99999999", "--out", "OUT"],
            "not a token",
        ),
        (["train", "tiny-s4", "--set", "task.seq_len=100000000", "--estimate"], "needs about 1,907.4 GiB of memory"),
    ],
)
def test_counts_sizes_and_ids_are_bounded_before_work(args, said, tmp_path):
    """issue #44, 3 and 4: refused at once with the bound, never a hang or an internal error."""
    from typer.testing import CliRunner

    from phasescope.cli import app

    args = [str(tmp_path / "run") if a == "OUT" else a for a in args]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert not (tmp_path / "run" / "records.jsonl").exists()
    assert result.exit_code == 2 and said in " ".join(result.output.split()), result.output


def test_correct_is_checked_only_where_every_judging_rule_agrees():
    """A target that is a prefix of a likelier candidate is right by greedy decoding ('Paris' under
    'Paris, France'), and an lm-eval record is judged by its task's metric: neither is refused."""
    from phasescope.rundir.records import check_record

    base = {"content_id": 0, "offset": 0, "phase": 0, "step": 4, "target": "right"}
    prefix = {"correct": True, "logprob_target": -0.2, "logprobs": {"right": -0.2, "right, longer": -0.3}}
    check_record(base | prefix, "prefix")
    unsure = {"correct": False, "logprob_target": -0.8, "logprobs": {"right": -0.8, "wrong": -2.0}}
    check_record(base | unsure, "below 1/2: greedy may answer another token")
    lm_eval = {"correct": False, "logprob_target": -0.01, "logprobs": {"right": -0.01}, "task": "t", "doc_id": 0}
    check_record(base | lm_eval, "lm-eval")
    with pytest.raises(InputError, match="correct false, but its target's log-prob"):
        check_record(base | lm_eval | {"task": None}, "the same record outside lm-eval")
    # --answers generation: what the server decoded, which its scoring requests may contradict (a stack's fault)
    decoded = {"correct": True, "logprob_target": -12.0, "logprobs": {"right": -12.0, "pair+1": -0.03}}
    check_record(base | decoded | {"answer_from": "generation"}, "generation")
    with pytest.raises(InputError, match="correct true, but another candidate"):
        check_record(base | decoded, "the same record scored by log-probs")


def test_a_field_every_other_record_carries_is_not_dropped_from_one_silently(tmp_path):
    """Issue #57: deleting answer_pos from 1 of 144 lines made the statistics by factor vanish."""
    import phasescope

    run = tmp_path / "run"
    phasescope.sweep("src/phasescope/assets/demo/tiny-s4", samples=2, offsets=range(8), design="crossed", out=run)
    lines = (run / "records.jsonl").read_text().splitlines()
    edited = json.loads(lines[5])
    del edited["answer_pos"]
    (run / "records.jsonl").write_text("\n".join(lines[:5] + [json.dumps(edited)] + lines[6:]) + "\n")
    with pytest.raises(InputError, match=r"line 6 lacks answer_pos, which the run's other records carry"):
        phasescope.analyze(run, n_resamples=100)


@pytest.mark.parametrize("end_phase", [7, -1])
def test_an_end_phase_out_of_range_is_refused_without_answer_pos(end_phase):
    record = {"content_id": 0, "offset": 0, "phase": 0, "step": 4, "correct": True, "logprob_target": -0.1,
              "logprobs": {"right": -0.1}, "end_phase": end_phase}  # fmt: skip
    with pytest.raises(InputError, match=rf"has end_phase {end_phase}; a phase is an integer in \[0, step=4\)"):
        Record.from_json(record, "x")


def test_a_generated_answer_called_right_must_be_the_right_answer():
    """Issue #57: `correct: true` beside a different answer_text was accepted and exported."""
    record = {"content_id": 0, "offset": 0, "phase": 0, "step": 4, "correct": True, "logprob_target": -0.1,
              "logprobs": {"right": -0.1}, "answer_from": "generation", "answer_text": " 123",
              "target_text": " 456"}  # fmt: skip
    with pytest.raises(InputError, match=r"has correct true, but the answer it generated \(' 123'\) is not"):
        Record.from_json(record, "x")
    assert Record.from_json(record | {"answer_text": " 456"}, "x").correct
