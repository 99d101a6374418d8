"""Run directories written by earlier versions of this repository (tests/data/old_runs/DATE-COMMIT:
the spec.json, records.jsonl and manifest.json that commit's `phasescope.sweep(tiny-s4, samples=4,
offsets=range(8))` wrote, schema 1 to today's) resume, analyze, report and export with this
version (#45 part 7): adding an option must never strand a run made before it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import phasescope

OLD_RUNS = sorted((Path(__file__).parent / "data" / "old_runs").iterdir())
KEY = ("content_id", "offset", "variant")


def copied(old: Path, tmp_path: Path) -> Path:
    run = tmp_path / old.name
    shutil.copytree(old, run)
    return run


def test_there_are_runs_of_several_schema_ages():
    ages = {json.loads((old / "spec.json").read_text()).get("schema", 1) for old in OLD_RUNS}
    assert len(OLD_RUNS) >= 4 and {1, 2} <= ages


@pytest.mark.parametrize("old", OLD_RUNS, ids=[old.name for old in OLD_RUNS])
def test_an_old_run_resumes_and_its_missing_records_are_scored_as_it_would_have(old, tmp_path):
    from phasescope.train.shipped import DEMO

    run = copied(old, tmp_path)
    common = dict(samples=4, offsets=range(8), out=run)
    complete = phasescope.sweep(str(DEMO / "tiny-s4"), **common)
    assert complete.scored == 0 and len(complete.records) == 32
    lines = (run / "records.jsonl").read_text().splitlines()
    (run / "records.jsonl").write_text("\n".join(lines[:12]) + "\n")  # as if it had stopped
    resumed = phasescope.sweep(str(DEMO / "tiny-s4"), **common)
    assert resumed.scored == 20
    then = {tuple(r.get(k, 0) for k in KEY): r for r in map(json.loads, lines)}
    for record in resumed.records:
        before = then[(record.content_id, record.offset, record.variant)]
        assert record.correct == before["correct"] and record.phase == before["phase"]
        assert record.logprob_target == pytest.approx(before["logprob_target"], abs=1e-5)
        if "prompt_digest" in before:  # the newer runs' records: what they were scored on is built again
            assert record.prompt_digest == before["prompt_digest"]


@pytest.mark.parametrize("old", OLD_RUNS, ids=[old.name for old in OLD_RUNS])
def test_an_old_run_is_analyzed_reported_and_exported(old, tmp_path):
    run = copied(old, tmp_path)
    metrics = phasescope.analyze(run, n_resamples=200)
    assert metrics.n_records == 32 and metrics.step == 4
    assert phasescope.report(run).exists()
    assert len(phasescope.load_run(run).records) == 32
    from phasescope.export import export

    written = export(run, "csv", tmp_path / "tables")
    assert {p.name for p in written} >= {"records.csv", "phases.csv", "offsets.csv"}


def test_old_runs_survive_a_new_recorded_probe_option_and_a_new_measured_backend_option(tmp_path, monkeypatch):
    """#45's 'done when', as a contributor would do it: kv-retrieval gains ``lures`` (an option that
    its description in spec.json records) and the phasescope backend gains ``quant`` (a measured
    model option, so spec.json records it too). Every old run still resumes, is analyzed the same
    and is reported; a run at a value the old runs did not have is still refused."""
    from dataclasses import dataclass

    from phasescope.backends import native
    from phasescope.backends.options import model_option
    from phasescope.errors import ProbeError
    from phasescope.probes import kv_options, kv_retrieval
    from phasescope.probes.options import option
    from phasescope.train.shipped import DEMO

    runs = [copied(old, tmp_path) for old in OLD_RUNS]
    before = [phasescope.analyze(run, n_resamples=200) for run in runs]

    @dataclass(frozen=True)
    class ProbeWithLures(kv_retrieval.Options):
        lures: int = option(0, "kv-retrieval: decoy needles.", metavar="N")

    @dataclass(frozen=True)
    class SpecWithLures(kv_retrieval.KVRetrievalSpec):
        lures: int = 0

    @dataclass(frozen=True)
    class BackendWithQuant(native.Options):
        quant: str = model_option("none", "Weight quantization.", measured=True)

    monkeypatch.setattr(kv_options, "Options", ProbeWithLures)  # what KVRetrievalSpec.of copies
    monkeypatch.setattr(kv_retrieval, "Options", ProbeWithLures)
    monkeypatch.setattr(kv_retrieval, "KVRetrievalSpec", SpecWithLures)
    monkeypatch.setattr(native, "Options", BackendWithQuant)
    common = dict(samples=4, offsets=range(8))
    for run, analyzed in zip(runs, before, strict=True):
        resumed = phasescope.sweep(str(DEMO / "tiny-s4"), out=run, **common)
        assert resumed.scored == 0 and len(resumed.records) == 32
        spec = json.loads((run / "spec.json").read_text())
        assert "lures" not in json.dumps(spec), "the old run's spec.json is kept as it was written"
        again = phasescope.analyze(run, n_resamples=200)
        assert (again.n_records, again.gap_pp, again.gap_p_value) == (
            analyzed.n_records,
            analyzed.gap_pp,
            analyzed.gap_p_value,
        )
        assert phasescope.report(run).exists()
    new = phasescope.sweep(str(DEMO / "tiny-s4"), out=tmp_path / "new", **common)
    assert json.loads((tmp_path / "new" / "spec.json").read_text())["probe"]["lures"] == 0
    assert len(new.records) == 32
    with pytest.raises(ProbeError, match="lures"):
        phasescope.sweep(str(DEMO / "tiny-s4"), out=runs[0], lures=2, **common)
    with pytest.raises(ProbeError, match="quant"):
        phasescope.sweep(str(DEMO / "tiny-s4"), out=runs[-1], quant="int8", **common)
