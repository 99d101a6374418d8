"""spec.json read back once as a type (issue #45): RunDir.read_sweep gives every reader the same
checked SavedSweep; a field of the wrong type is named, and a run without spec.json reads empty."""

from __future__ import annotations

import json

import pytest

from phasescope.errors import InputError
from phasescope.rundir import RunDir
from phasescope.rundir.saved import SavedSweep

SPEC = {"schema": 2, "probe": {"probe": "kv-retrieval", "design": "crossed", "kv_gaps": [0, 1]}, "offsets": [0, 1, 2],
        "samples": 8, "seed": 3, "step": 4, "align": 0, "window": 8, "local": 8, "model": "runs/m"}  # fmt: skip


def saved(tmp_path, spec) -> SavedSweep:
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    return RunDir(tmp_path).read_sweep()


def test_a_spec_reads_as_its_typed_fields(tmp_path):
    s = saved(tmp_path, SPEC)
    assert (s.seed, s.step, s.window, s.align, s.offsets, s.samples, s.model) == (3, 4, 8, 0, [0, 1, 2], 8, "runs/m")
    assert (s.probe_name, s.design, s.kv_gaps, s.contents_by_sample) == ("kv-retrieval", "crossed", [0, 1], True)
    assert s.raw == SPEC and s.path.endswith("spec.json")


def test_a_run_without_spec_reads_as_an_empty_sweep(tmp_path):
    s = RunDir(tmp_path).read_sweep()
    assert s.raw == {} and s.seed == 0 and s.step is None and s.probe_name is None and s.offsets is None


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [("seed", "0", "seed must be an integer"), ("step", 4.0, "step must be an integer"),
     ("offsets", "0:24", "offsets must be a list of integers"), ("samples", True, "samples must be an integer"),
     ("schema", 99, "schema 99 is not a layout")],
)  # fmt: skip
def test_a_field_of_the_wrong_type_is_named(tmp_path, field, value, said):
    with pytest.raises(InputError, match=said):
        saved(tmp_path, SPEC | {field: value})


def test_whether_records_number_the_contents_is_the_probes_word_and_older_runs_read_by_their_probe(tmp_path):
    """spec.json records ``Probe.contents_by_sample``; a spec.json written before it says nothing,
    and then only an lm-eval run (documents numbered task by task) reads as not numbered by sample."""
    assert saved(tmp_path, SPEC | {"contents_by_sample": False}).contents_by_sample is False
    older_lm_eval = SPEC | {"probe": {"probe": "lm-eval", "tasks": {}}}
    assert saved(tmp_path, older_lm_eval).contents_by_sample is False
    assert saved(tmp_path, older_lm_eval | {"contents_by_sample": True}).contents_by_sample is True
    with pytest.raises(InputError, match="contents_by_sample must be true or false, got 'no'"):
        saved(tmp_path, SPEC | {"contents_by_sample": "no"})
