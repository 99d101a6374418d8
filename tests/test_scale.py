"""A sweep split into parts (``--shard I/N``), merged exactly (``phasescope merge``), and run as
tasks of a local Ray cluster (``sweep --ray``): the merged run holds the unsplit sweep's records,
spec and verdict; a merge of parts that are not one sweep is refused naming the cause (issue #58)."""

import json
import shutil

import pytest
from typer.testing import CliRunner

import phasescope
from phasescope.cli.app import app
from phasescope.errors import InputError
from phasescope.scale import merge
from phasescope.specs import parse_shard

SWEEP = {"step": 4, "samples": 7, "offsets": range(12), "kv_gaps": (0, 1)}  # two renderings per content
FLOATS = {"logprob_target", "logprobs", "token_logprobs"}  # equal up to float rounding
HASHES = ("records_sha256", "metrics_sha256")  # of the file's bytes: the merged records are in another order


def sweep_parts(tmp_path, count, model="demo:tiny-s4", **sweep):
    sweep = sweep or SWEEP
    runs = [phasescope.sweep(model, shard=(i, count), out=tmp_path / f"part-{i}", **sweep) for i in range(count)]
    return [run.run_dir for run in runs]


def by_key(run_dir):
    records = map(json.loads, (run_dir / "records.jsonl").read_text().splitlines())
    return {(r["content_id"], r["offset"], r.get("variant", 0)): r for r in records}


def assert_same_records(merged, whole):
    """Record for record: the same keys, prompts and grades; the log-probabilities equal up to
    float rounding (a part batches other contents together than the unsplit sweep does)."""
    a, b = by_key(merged), by_key(whole)
    assert a.keys() == b.keys()
    for key, record in a.items():
        other = b[key]
        exact = record.keys() - FLOATS
        assert exact == other.keys() - FLOATS and all(record[k] == other[k] for k in exact)
        for name in FLOATS & record.keys():
            assert record[name] == pytest.approx(other[name], abs=1e-4)


def assert_same_analysis(merged, whole):
    """analyze on both: the same metrics.json (verdict sentence, intervals, p-values) but the hashes
    of the files' bytes."""
    phasescope.analyze(merged, n_resamples=200)
    phasescope.analyze(whole, n_resamples=200)
    a, b = (json.loads((run / "metrics.json").read_text()) for run in (merged, whole))
    for key in HASHES:
        a.pop(key, None), b.pop(key, None)
    assert a["verdict"]["sentence"] == b["verdict"]["sentence"]
    assert json.loads(json.dumps(a), parse_float=lambda x: round(float(x), 4)) == json.loads(
        json.dumps(b), parse_float=lambda x: round(float(x), 4)
    )


def spec_of(run_dir):
    return json.loads((run_dir / "spec.json").read_text())


def test_parts_merge_into_the_run_the_unsplit_sweep_writes(tmp_path):
    whole = phasescope.sweep("demo:tiny-s4", out=tmp_path / "whole", **SWEEP).run_dir
    parts = sweep_parts(tmp_path, 3)
    assert [len(by_key(p)) for p in parts] == [3 * 24, 2 * 24, 2 * 24]  # contents 0,3,6 | 1,4 | 2,5
    merged = merge(parts, tmp_path / "merged")
    assert len(merged.records) == 7 * 24 and merged.parts == 3
    assert_same_records(tmp_path / "merged", whole)
    saved = spec_of(tmp_path / "merged")
    assert saved.pop("merged_from") == [str(p) for p in parts]
    assert saved == spec_of(whole)  # the default batch size included: a part sizes it over every content
    assert_same_analysis(tmp_path / "merged", whole)
    again = phasescope.sweep("demo:tiny-s4", out=tmp_path / "merged", **SWEEP)  # resumes as the unsplit sweep
    assert again.scored == 0


def test_a_prompts_file_of_uneven_lengths_merges_exactly(tmp_path, qwen3_dir):
    """Another probe (contents from a file, in file order) on a transformers model."""
    sweep = {"probe": "prompts:examples/prompts.jsonl", "step": 4, "offsets": range(8)}
    model = f"hf:{qwen3_dir}"
    whole = phasescope.sweep(model, out=tmp_path / "whole", **sweep).run_dir
    parts = sweep_parts(tmp_path, 2, model, **sweep)
    merge(parts, tmp_path / "merged")
    assert_same_records(tmp_path / "merged", whole)
    assert {k: v for k, v in spec_of(tmp_path / "merged").items() if k != "merged_from"} == spec_of(whole)


def test_an_interrupted_part_resumes_and_the_merge_waits_for_it(tmp_path):
    parts = sweep_parts(tmp_path, 2)
    records = parts[1] / "records.jsonl"
    lines = records.read_text().splitlines(keepends=True)
    records.write_text("".join(lines[:30]) + lines[30][:25])  # cut mid-line, as a killed job leaves it
    with pytest.raises(InputError, match=r"contents .* are not scored at every offset yet \(parts 1 of 2\)"):
        merge(parts, tmp_path / "merged")
    assert not (tmp_path / "merged" / "records.jsonl").exists()  # nothing written before every check passed
    resumed = phasescope.sweep("demo:tiny-s4", shard=(1, 2), out=parts[1], **SWEEP)
    assert resumed.scored == len(lines) - 30
    whole = phasescope.sweep("demo:tiny-s4", out=tmp_path / "whole", **SWEEP).run_dir
    merge(parts, tmp_path / "merged")
    assert_same_records(tmp_path / "merged", whole)


def test_bad_merges_are_refused_naming_the_cause(tmp_path):
    parts = sweep_parts(tmp_path, 3)
    with pytest.raises(InputError, match=r"parts 2 of 3 are missing: sweep them \(--shard 2/3"):
        merge(parts[:2], tmp_path / "m")
    other = phasescope.sweep("demo:tiny-s4", shard=(2, 3), out=tmp_path / "other", **(SWEEP | {"seed": 1})).run_dir
    with pytest.raises(InputError, match=r"parts of different sweeps \(spec.json differs in .*seed"):
        merge([*parts[:2], other], tmp_path / "m")
    full = phasescope.sweep("demo:tiny-full", shard=(2, 3), out=tmp_path / "full", **SWEEP).run_dir  # another model
    with pytest.raises(InputError, match=r"different sweeps \(spec.json differs in .*model"):
        merge([*parts[:2], full], tmp_path / "m")
    whole = phasescope.sweep("demo:tiny-s4", out=tmp_path / "whole", **SWEEP).run_dir
    with pytest.raises(InputError, match="holds a whole sweep, not a part"):
        merge([*parts, whole], tmp_path / "m")
    with pytest.raises(InputError, match="holds a sweep run that merge did not write"):
        merge(parts, whole)
    assert not (tmp_path / "m").exists()


def test_an_overlap_a_moved_record_and_another_model_are_refused(tmp_path):
    parts = sweep_parts(tmp_path, 2)
    lines = (parts[0] / "records.jsonl").read_text().splitlines(keepends=True)
    overlapping = tmp_path / "overlapping"  # part 1 with one of part 0's records copied in
    shutil.copytree(parts[1], overlapping)
    with open(overlapping / "records.jsonl", "a") as f:
        f.write(lines[0])
    with pytest.raises(InputError, match="is in .* and in .*: the parts overlap"):
        merge([parts[0], overlapping], tmp_path / "m")
    moved = tmp_path / "moved"  # and part 0 without it: the record was moved between parts
    shutil.copytree(parts[0], moved)
    (moved / "records.jsonl").write_text("".join(lines[1:]))
    with pytest.raises(InputError, match=r"holds content 0, which part 0 of 2 scores, not part 1"):
        merge([moved, overlapping], tmp_path / "m")
    manifest = json.loads((parts[1] / "manifest.json").read_text())
    manifest["model_fingerprint"] = "sha256:another-model"
    (parts[1] / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="scored by different models"):
        merge(parts, tmp_path / "m")


def test_an_edited_record_fails_the_plan_digest(tmp_path):
    parts = sweep_parts(tmp_path, 2)
    path = parts[0] / "records.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    records[0]["prompt_digest"] = "0" * 16
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(InputError, match="not the prompts their sweep builds"):
        merge(parts, tmp_path / "m")


def test_a_run_directory_refuses_another_part(tmp_path):
    phasescope.sweep("demo:tiny-s4", shard=(0, 3), out=tmp_path / "p", **SWEEP)
    with pytest.raises(InputError, match="holds part 0 of 3 of a split sweep; this sweep is part 1 of 2"):
        phasescope.sweep("demo:tiny-s4", shard=(1, 2), out=tmp_path / "p", **SWEEP)
    with pytest.raises(InputError, match="this sweep is the whole sweep"):
        phasescope.sweep("demo:tiny-s4", out=tmp_path / "p", **SWEEP)


@pytest.mark.parametrize(("text", "expected"), [("0/1", (0, 1)), ("3/8", (3, 8)), ((2, 4), (2, 4)), (" 1/2", (1, 2))])
def test_shard_text_is_read(text, expected):
    assert parse_shard(text) == expected


@pytest.mark.parametrize("text", ["4/4", "-1/4", "1/0", "2", "a/b", "1/2/3"])
def test_bad_shards_are_refused(text):
    with pytest.raises(InputError, match="--shard"):
        parse_shard(text)


def test_a_part_without_contents_is_refused(tmp_path):
    with pytest.raises(InputError, match="--shard 5/8 holds no content: the sweep has 3 contents"):
        phasescope.sweep("demo:tiny-s4", shard=(5, 8), out=tmp_path / "p", **(SWEEP | {"samples": 3}))


def test_the_cli_dry_run_prints_every_part_and_merge_exits_2_on_a_bad_merge(tmp_path):
    runner = CliRunner()
    args = ["sweep", "--model", "demo:tiny-s4", "--samples", "7", "--offsets", "0:12", "--out", str(tmp_path / "d")]
    planned = runner.invoke(app, [*args, "--shard", "1/3", "--dry-run"], env={"COLUMNS": "200"})
    assert planned.exit_code == 0, planned.output
    assert "part 1, records 24" in planned.output  # part 1 of 3: contents 1 and 4
    rows = [line for line in planned.output.splitlines() if line.startswith("│ ")]
    assert [row.split("│")[2].strip() for row in rows] == ["36", "24", "24"]
    assert not (tmp_path / "d").exists()
    for i in range(2):
        done = runner.invoke(app, [*args[:-1], str(tmp_path / f"p{i}"), "--shard", f"{i}/2"])
        assert done.exit_code == 0, done.output
    joined = runner.invoke(app, ["merge", str(tmp_path / "p0"), str(tmp_path / "p1"), "--out", str(tmp_path / "m")])
    assert joined.exit_code == 0 and "84 records merged from 2 parts" in joined.output
    refused = runner.invoke(app, ["merge", str(tmp_path / "p0"), "--out", str(tmp_path / "m2")])
    assert refused.exit_code == 2 and "parts 1 of 2 are missing" in refused.output
    bad = runner.invoke(app, [*args, "--shard", "2/2"])
    assert bad.exit_code == 2 and "the part I must be 0 .. N-1" in bad.output
    lone = runner.invoke(app, [*args, "--ray-parts", "2"])
    assert lone.exit_code == 2 and "go with --ray" in lone.output


def test_ray_on_a_local_cluster_of_two_workers_equals_the_unsplit_sweep(tmp_path):
    """sweep --ray against a Ray cluster started here (two CPUs: two workers): the merged run is
    the unsplit sweep's, record for record and verdict; a rerun resumes (nothing scored twice)."""
    from phasescope.scale import run_on_ray

    whole = phasescope.sweep("demo:tiny-s4", out=tmp_path / "whole", **SWEEP).run_dir
    with pytest.raises(InputError, match="holds a sweep run that merge did not write"):  # before any part starts
        run_on_ray("demo:tiny-s4", "local", 2, out=whole, **SWEEP)
    merged = run_on_ray("demo:tiny-s4", "local", 2, out=tmp_path / "ray", **SWEEP)
    assert merged.parts == 2 and len(merged.records) == 7 * 24
    assert sorted(p.name for p in (tmp_path / "ray" / "parts").iterdir()) == ["part-0", "part-1"]
    assert_same_records(tmp_path / "ray", whole)
    assert_same_analysis(tmp_path / "ray", whole)
    before = {p: (p / "records.jsonl").stat().st_mtime_ns for p in (tmp_path / "ray" / "parts").iterdir()}
    again = run_on_ray("demo:tiny-s4", "local", None, out=tmp_path / "ray", **SWEEP)  # the earlier split resumed
    assert again.parts == 2 and len(again.records) == 7 * 24
    assert {p: (p / "records.jsonl").stat().st_mtime_ns for p in before} == before  # nothing rescored
    with pytest.raises(InputError, match="split into 2 parts, not 3"):
        run_on_ray("demo:tiny-s4", "local", 3, out=tmp_path / "ray", **SWEEP)


def test_the_worked_example_of_docs_scale_runs_as_written(tmp_path, monkeypatch):
    """docs/scale.md's 'split, then merge' block, run line by line: the merged run is the unsplit
    sweep's, and the unsplit command run on it finds nothing to score."""
    import shlex
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "scale.md").read_text()
    block = text.split("## By hand: split, then merge", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    outputs = []
    for line in block.strip().splitlines():
        done = runner.invoke(app, shlex.split(line)[1:], env={"COLUMNS": "200"})
        assert done.exit_code == 0, f"{line}: {done.output}"
        outputs.append(done.output)
    assert "576 records merged from 2 parts" in outputs[2]
    whole = runner.invoke(app, ["sweep", "--model", "demo:tiny-s4", "--samples", "24", "--offsets", "0:24",
                                "--out", "runs/split/merged"])  # fmt: skip
    assert whole.exit_code == 0 and "already complete (576 records)" in whole.output, whole.output
    assert (tmp_path / "runs/split/merged/metrics.json").is_file()
