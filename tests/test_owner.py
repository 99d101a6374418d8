"""One owner per directory (issue #44, 1): every command that writes a directory refuses an empty
--out, the current directory, a file and a directory another command made, before any work."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from phasescope.cli import app
from phasescope.errors import InputError
from phasescope.rundir.owner import claim_out, kinds_of

DEMO = "src/phasescope/assets/demo/tiny-s4"
# each command that writes a directory, with what it needs besides --out
COMMANDS = {
    "train": ["train", "tiny-s4"],
    "demo": ["demo"],
    "reproduce": ["reproduce"],
    "compare": ["compare", "RUN"],
    "theory": ["theory"],
    "preferences": ["preferences", "--model", DEMO],
    "ablate": ["ablate", "--model", DEMO],
    "export": ["export", "RUN", "--format", "jsonl"],
    "check": ["check", "--stack", "openai:http://127.0.0.1:9/v1#m", "--reference-free", "--tokenizer", "deepseek-v4"],
}
# the kinds a command may find in its --out: its own (to resume or update) and a sweep's sections
OWN = {"train": ("model", "training"), "reproduce": ("reproduction",), "compare": ("comparison",),
       "theory": ("sweep",), "preferences": ("sweep",), "ablate": ("sweep",), "demo": (), "export": (),
       "check": ("check",)}  # fmt: skip

MARKERS = {"sweep": "records.jsonl", "model": "model.safetensors", "comparison": "compare.html",
           "reproduction": "RESULTS.md", "training": "log.jsonl", "check": "check.json"}  # fmt: skip


def invoke(args: list[str], out: str, tmp_path):
    args = [str(tmp_path / "run") if a == "RUN" else a for a in args]
    return CliRunner().invoke(app, [*args, "--out", out], env={"COLUMNS": "200"})


@pytest.mark.parametrize("name", sorted(COMMANDS))
@pytest.mark.parametrize("out", ["", " ", "."])
def test_an_empty_or_current_directory_out_is_refused_by_every_command(name, out, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke(COMMANDS[name], out, tmp_path)
    assert result.exit_code == 2, result.output
    assert "--out" in result.output and ("empty" in result.output or "current directory" in result.output)
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "nothing written"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_file_out_is_refused_before_any_work(name, tmp_path):
    target = tmp_path / "results.txt"
    target.write_text("mine")
    result = invoke(COMMANDS[name], str(target), tmp_path)
    assert result.exit_code == 2 and "is a file, not a directory" in " ".join(result.output.split())
    assert target.read_text() == "mine"


@pytest.mark.parametrize(
    ("name", "kind"), [(n, k) for n in sorted(COMMANDS) for k in sorted(MARKERS) if k not in OWN[n]]
)
def test_a_directory_another_command_made_is_refused(name, kind, tmp_path):
    if kind in OWN[name]:
        pytest.skip(f"{name} may write into {kind} directories (its own, or a sweep's sections)")
    other = tmp_path / "other"
    other.mkdir()
    (other / MARKERS[kind]).write_text("{}")
    result = invoke(COMMANDS[name], str(other), tmp_path)
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and f"--out {other} holds" in said and "made by `phasescope" in said, said
    assert sorted(p.name for p in other.iterdir()) == [MARKERS[kind]], "nothing written beside it"


def test_a_sweep_into_a_comparison_or_a_reproduction_is_refused(tmp_path):
    for marker in ("compare.html", "RESULTS.md", "log.jsonl"):
        target = tmp_path / marker.split(".")[0]
        target.mkdir()
        (target / marker).write_text("x")
        result = CliRunner().invoke(app, ["sweep", "--model", DEMO, "--samples", "1", "--out", str(target)])
        assert result.exit_code == 2 and "not a sweep" in " ".join(result.output.split()), result.output


def test_export_never_writes_over_its_own_run(tmp_path):
    """issue #57: `export RUN --format jsonl --out RUN` replaced the run's records.jsonl with the flat table."""
    import phasescope

    run = tmp_path / "run"
    phasescope.sweep(DEMO, samples=2, offsets=range(8), out=run)
    before = (run / "records.jsonl").read_text()
    result = CliRunner().invoke(app, ["export", str(run), "--format", "jsonl", "--out", str(run)])
    assert result.exit_code == 2 and "holds a sweep run" in " ".join(result.output.split())
    assert (run / "records.jsonl").read_text() == before and phasescope.analyze(run, n_resamples=100).n_records == 16
    assert CliRunner().invoke(app, ["export", str(run), "--format", "jsonl"]).exit_code == 0  # RUN/export: its own


def test_claim_out_names_what_it_found_and_lets_a_command_resume_its_own(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "spec.json").write_text(json.dumps({}))
    (run / "records.jsonl").write_text("")
    assert kinds_of(run) == {"sweep": ["spec.json", "records.jsonl"]}
    assert claim_out(run, "phasescope theory", may_hold=("sweep",)) == run
    with pytest.raises(InputError, match=r"holds a sweep run \(spec.json, records.jsonl, made by `phasescope sweep`\)"):
        claim_out(run, "phasescope train", may_hold=("model",))
    assert claim_out(None, "phasescope train") is None
    with pytest.raises(InputError, match="filesystem root"):
        claim_out("/", "phasescope demo")


@pytest.mark.parametrize("command", ["analyze", "report", "export"])
def test_reading_a_model_directory_as_a_run_says_what_it_is_and_where_to_sweep(command):
    """issue #44, 6: it advised sweeping into the model's directory, which sweep refuses."""
    result = CliRunner().invoke(app, [command, DEMO], env={"COLUMNS": "300"})
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and f"{DEMO} holds a model (model.safetensors" in said
    assert f"sweep this model into a directory of its own: phasescope sweep --model {DEMO} --out runs/X" in said
