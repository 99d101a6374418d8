"""Issue #30, first item: nothing is written through a link. A run directory received from
someone else may hold symbolic links; every writer -- metrics.json, spec.json, manifest.json, a
rewritten records.jsonl, the records' append, report.html, figures, exports, section files, the
training log -- either replaces the link's *name* with its own file or refuses with the reason,
and the file the link points to (the victim) is never touched."""

import json
import os

import pytest

from phasescope.errors import InputError
from phasescope.rundir.files import atomic_write_text, write_section
from test_faults import FAST, cli, refused, train

VICTIM_TEXT = "precious data\n"


@pytest.fixture
def victim(tmp_path):
    path = tmp_path / "victim.txt"
    path.write_text(VICTIM_TEXT)
    return path


def plant(link, victim) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(victim, link)


def test_a_planted_temp_file_name_redirects_nothing(tmp_path, victim):
    """The old writer used a fixed PATH.tmp; a link there sent the write to the victim."""
    plant(tmp_path / "metrics.json.tmp", victim)
    atomic_write_text(tmp_path / "metrics.json", "{}")
    assert victim.read_text() == VICTIM_TEXT and (tmp_path / "metrics.json").read_text() == "{}"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".metrics.json.")], "no temp file left"


def test_a_target_that_is_a_link_is_refused_naming_it(tmp_path, victim):
    plant(tmp_path / "theory.json", victim)
    with pytest.raises(InputError, match="is a symbolic link"):
        write_section(tmp_path, "theory.json", {"a": 1})
    assert victim.read_text() == VICTIM_TEXT


def test_a_failed_write_leaves_no_temp_file(tmp_path, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError, match="No space"):
        atomic_write_text(tmp_path / "metrics.json", "{}")
    assert list(tmp_path.iterdir()) == []


def test_analyze_with_a_planted_temp_link_writes_its_own_file(swept, victim):
    plant(swept / "metrics.json.tmp", victim)
    assert cli("analyze", str(swept)).exit_code == 0
    assert victim.read_text() == VICTIM_TEXT and json.loads((swept / "metrics.json").read_text())["verdict"]


@pytest.mark.parametrize("name", ["metrics.json", "records.jsonl", "spec.json", ".lock"])
def test_a_run_directory_whose_files_are_links_is_refused(swept, model_dir, victim, name):
    target = swept / name
    if target.exists():
        target.unlink()
    plant(target, victim)
    command = ["analyze", str(swept)] if name == "metrics.json" else ["sweep", "--model", str(model_dir)]
    result = cli(*command, *([] if name == "metrics.json" else ["--out", str(swept), *FAST]))
    refused(result, "is a symbolic link", name)
    assert victim.read_text() == VICTIM_TEXT


def test_report_and_export_never_write_through_links(swept, victim):
    assert cli("analyze", str(swept)).exit_code == 0
    plant(swept / "figures" / "phase_accuracy.png", victim)
    refused(cli("report", str(swept)), "is a symbolic link")
    (swept / "figures" / "phase_accuracy.png").unlink()
    plant(swept / "report.html", victim)
    refused(cli("report", str(swept)), "is a symbolic link")
    plant(swept / "export" / "records.csv", victim)
    refused(cli("export", str(swept), "--format", "csv"), "is a symbolic link")
    assert victim.read_text() == VICTIM_TEXT


def test_a_training_log_that_is_a_link_is_refused(tmp_path, victim):
    out = tmp_path / "train"
    assert train(out, "--stop-after", "2").exit_code == 0
    (out / "log.jsonl").unlink()
    plant(out / "log.jsonl", victim)
    refused(train(out, "--resume"), "is a symbolic link")
    assert victim.read_text() == VICTIM_TEXT


# ---- issue #30, item 2 (records): every number checked where it enters ----


@pytest.mark.parametrize(
    ("field", "value"),
    [("logprob_target", 0.5), ("logprob_target", -1e308), ("logprobs", {"right": 1.91, "pair+1": -2.0})],
)
def test_records_with_impossible_log_probs_are_refused(swept, field, value):
    lines = (swept / "records.jsonl").read_text().splitlines()
    record = json.loads(lines[3])
    record[field] = value
    lines[3] = json.dumps(record)
    (swept / "records.jsonl").write_text("\n".join(lines) + "\n")
    refused(cli("analyze", str(swept)), "line 4", field, "log-probability")


def test_records_of_another_step_than_the_spec_are_refused(swept):
    lines = [json.loads(line) for line in (swept / "records.jsonl").read_text().splitlines()]
    for record in lines:  # each record consistent in itself (its phase from its anchor at step 8)
        record["step"] = 8
        record["phase"] = (record["anchor_pos"] - record["align"]) % 8
    (swept / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    refused(cli("analyze", str(swept)), "step 8", "step 4")


@pytest.mark.parametrize("command, folder", [("report", "figures"), ("export", "export")])
def test_a_linked_subfolder_of_a_run_cannot_redirect_its_files(swept, tmp_path, command, folder):
    """RUN/figures or RUN/export as a link to another directory is refused, and nothing lands there."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (swept / folder).symlink_to(elsewhere)
    refused(cli(command, str(swept)), "symbolic link")
    assert list(elsewhere.iterdir()) == []


def test_lm_eval_export_never_overwrites_a_file_it_did_not_write(tmp_path):
    from phasescope.errors import InputError
    from phasescope.export import export

    precious = tmp_path / "precious.txt"
    precious.write_text("keep me")
    with pytest.raises(InputError, match="not a phasescope lm-eval export"):
        export(tmp_path / "run", "lm-eval", precious)
    assert precious.read_text() == "keep me"
