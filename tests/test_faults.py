"""The fault suite: every case of the reliability issue, as a careless or unlucky user would hit
it, gives a clear ``error: ...`` (exit 2, no traceback) or a correct result, and leaves nothing
half-written that a later command would trust."""

import json
import shutil

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

from phasescope.cli import app
from phasescope.demo import ASSETS

runner = CliRunner()
FAST = ["--samples", "4", "--no-progress"]
TRAIN_FAST = ["--set", "warm_start_steps=0", "--set", "eval_batches=1", "--set", "batch_size=8"]  # and steps


def cli(*args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "300"})


def refused(result, *phrases: str) -> None:
    """Exit 2 with ``error: ...`` naming the cause, never a traceback or an internal error."""
    assert result.exit_code == 2, result.output
    assert "error:" in result.output and "Traceback" not in result.output and "internal error" not in result.output
    for phrase in phrases:
        assert phrase in result.output, result.output


# fixtures model_dir (a copy of the demo's tiny-s4) and swept (its 4-content run): tests/conftest.py


# 1. invented period, phases out of range
def test_offsets_that_miss_phases_are_refused_before_scoring(tmp_path, model_dir):
    even = ",".join(str(d) for d in range(0, 24, 2))
    result = cli("sweep", "--model", str(model_dir), "--out", str(tmp_path / "e"), "--offsets", even, *FAST)
    refused(result, "phase(s) [1, 3] at fewer than two offsets")
    assert not (tmp_path / "e").exists(), "nothing is written for a refused sweep"


def test_records_with_a_phase_out_of_range_are_refused(swept):
    lines = (swept / "records.jsonl").read_text().splitlines()
    record = json.loads(lines[3]) | {"phase": 7}
    (swept / "records.jsonl").write_text("\n".join(lines[:3] + [json.dumps(record)] + lines[4:]) + "\n")
    refused(cli("analyze", str(swept)), "line 4", "phase 7")


# 2. bad lines are never skipped
@pytest.mark.parametrize("bad", ["", "{not json", "[1, 2]", '{"content_id": 0}'])
def test_a_bad_line_in_the_middle_stops_analyze_and_the_sweep(swept, model_dir, bad):
    lines = (swept / "records.jsonl").read_text().splitlines()
    (swept / "records.jsonl").write_text("\n".join(lines[:10] + [bad] + lines[10:]) + "\n")
    refused(cli("analyze", str(swept)), "line 11")
    before = (swept / "records.jsonl").read_text()
    refused(cli("sweep", "--model", str(model_dir), "--out", str(swept), *FAST), "line 11")
    assert (swept / "records.jsonl").read_text() == before, "the valid records after the bad line are kept"


def test_a_cut_last_line_is_left_out_by_analyze_and_rescored_by_the_sweep(swept, model_dir):
    text = (swept / "records.jsonl").read_text()
    (swept / "records.jsonl").write_text(text[:-40])  # killed mid-write
    result = cli("analyze", str(swept))
    assert result.exit_code == 0
    assert "cut short" in json.loads((swept / "metrics.json").read_text())["records_note"]
    assert cli("sweep", "--model", str(model_dir), "--out", str(swept), *FAST).exit_code == 0
    assert (swept / "records.jsonl").read_text() == text


# 3. resume with other weights / same weights through another path
def test_resuming_with_changed_weights_is_refused_and_another_path_is_fine(swept, model_dir, tmp_path, monkeypatch):
    weights = load_file(model_dir / "model.safetensors")
    name = next(iter(weights))
    save_file({**weights, name: weights[name] + 0.01}, model_dir / "model.safetensors")
    refused(cli("sweep", "--model", str(model_dir), "--out", str(swept), *FAST), "another model")
    shutil.copytree(ASSETS / "tiny-s4", tmp_path / "same", dirs_exist_ok=True)
    monkeypatch.chdir(tmp_path)
    result = cli("sweep", "--model", "./same/../same", "--out", str(swept), *FAST)
    assert result.exit_code == 0 and "already complete" in result.output


def test_a_partial_run_is_analysed_with_a_note_saying_so(swept):
    lines = (swept / "records.jsonl").read_text().splitlines(keepends=True)
    (swept / "records.jsonl").write_text("".join(lines[: len(lines) // 3]))  # what an early interruption leaves
    result = cli("analyze", str(swept))
    note = json.loads((swept / "metrics.json").read_text())["records_note"]
    assert f"partial run: {len(lines) // 3} of {len(lines)} planned records" in note
    assert "partial run" in result.output


def test_a_model_directory_as_out_or_a_manifest_without_fingerprint_is_refused(swept, model_dir):
    refused(cli("sweep", "--model", str(model_dir), "--out", str(model_dir), *FAST), "holds a model")
    manifest = json.loads((swept / "manifest.json").read_text())
    del manifest["model_fingerprint"]
    (swept / "manifest.json").write_text(json.dumps(manifest))
    refused(cli("sweep", "--model", str(model_dir), "--out", str(swept), *FAST), "records no weights fingerprint")


# 4. stale report
def test_report_describes_the_records_on_disk(tmp_path, model_dir):
    run = tmp_path / "run"
    part = cli("sweep", "--model", str(model_dir), "--out", str(run), *FAST)
    assert part.exit_code == 0
    lines = (run / "records.jsonl").read_text().splitlines(keepends=True)
    (run / "records.jsonl").write_text("".join(lines[:20]))
    assert cli("analyze", str(run)).exit_code == 0
    assert json.loads((run / "metrics.json").read_text())["n_records"] == 20
    assert cli("sweep", "--model", str(model_dir), "--out", str(run), *FAST).exit_code == 0  # resumes to 96
    assert cli("report", str(run)).exit_code == 0
    assert json.loads((run / "metrics.json").read_text())["n_records"] == 96
    assert "over 96 records" in (run / "report.html").read_text()


# 5. NaN and inf
@pytest.mark.parametrize("setting", ["lr=inf", "lr=nan", "model.norm_eps=-1", "model.rope_theta=inf"])
def test_non_finite_or_invalid_training_settings_are_refused_before_writing(tmp_path, setting):
    result = cli("train", "tiny-s4", "--set", setting, "--out", str(tmp_path / "t"), "--no-progress")
    refused(result, setting.split("=")[0].split(".")[-1])
    assert not (tmp_path / "t").exists()


def test_a_diverging_run_stops_and_keeps_its_last_good_checkpoint(tmp_path, monkeypatch):
    import phasescope.train.trainer as trainer

    calls = {"n": 0}
    real = trainer.batch_loss

    def explode(*args):  # finite for 4 steps, then NaN
        calls["n"] += 1
        loss = real(*args)
        return loss if calls["n"] <= 4 else loss * float("nan")

    monkeypatch.setattr(trainer, "batch_loss", explode)
    out = tmp_path / "t"
    refused(train(out), "training diverged at step 4", "step-4")
    weights = load_file(out / "checkpoints" / "step-4" / "model.safetensors")
    assert all(torch.isfinite(w).all() for w in weights.values())
    assert not (out / "model.safetensors").exists(), "no final model from a diverged run"


def test_a_model_with_nan_weights_is_refused_by_the_sweep(tmp_path, model_dir):
    weights = load_file(model_dir / "model.safetensors")
    name = next(iter(weights))
    save_file({**weights, name: weights[name] * float("nan")}, model_dir / "model.safetensors")
    refused(cli("sweep", "--model", str(model_dir), "--out", str(tmp_path / "r"), *FAST), "NaN or infinite logits")
    records = tmp_path / "r" / "records.jsonl"
    assert not records.exists() or records.read_text() == ""


# 6. a non-causal model through hf:
def test_a_bidirectional_model_is_refused(tmp_path):
    from transformers import BertConfig, BertForMaskedLM

    from hf_models import save, word_tokenizer

    tok = word_tokenizer()
    cfg = BertConfig(
        vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64
    )
    save(BertForMaskedLM(cfg), tmp_path / "bert", tok)
    # through the API: transformers' logger keeps a stream of an earlier CliRunner call, which garbles CLI output
    import phasescope
    from phasescope.errors import InputError

    with pytest.raises(InputError, match="not a causal language model"):
        phasescope.sweep(f"hf:{tmp_path / 'bert'}", step=4, samples=2, out=tmp_path / "r")


# 7. a pad unit that merges with its neighbours
class NeighbourChangingTokenizer:
    """One token per character, except that ")" becomes another token when a dot, space or
    newline follows it other than ".c": every padding before ".clamp" changes the token before
    it -- runs of "." even add exactly one token per repeat (the count check alone accepted this)."""

    def encode(self, text, add_special_tokens=False):
        def changed(i: int) -> bool:
            return text[i] == ")" and text[i + 1 : i + 2] in (".", " ", "\n") and text[i + 1 : i + 3] != ".c"

        return [1000 if changed(i) else ord(c) for i, c in enumerate(text)]

    def decode(self, ids):
        return "".join(")" if i == 1000 else chr(i) for i in ids)


def test_a_pad_unit_that_changes_the_token_before_it_is_refused():
    from phasescope.probes import CompletionSpec, PaddingCompletionProbe, ProbeError

    spec = CompletionSpec(prompt="y = (x * scale){pad}.clamp(-448.0, 448.0)\nreturn y.to(torch.float", pad_unit=".")
    probe = PaddingCompletionProbe(NeighbourChangingTokenizer(), spec)
    before, after = spec.prompt.split("{pad}")
    assert len(probe._ids(before + "..." + after)) == len(probe._ids(before + after)) + 3  # the count check passes
    with pytest.raises(ProbeError, match="without changing the text around it"):
        probe.items(list(range(24)), 1, np.random.default_rng(0))


# 8. duplicates and two writers
def test_repeated_offsets_are_refused(tmp_path, model_dir):
    offsets = ",".join(map(str, [*range(8), 7, 7]))
    refused(cli("sweep", "--model", str(model_dir), "--out", str(tmp_path / "r"), "--offsets", offsets, *FAST), "[7]")


def test_a_second_writer_is_refused_while_the_first_holds_the_lock(tmp_path, model_dir):
    from filelock import FileLock

    run = tmp_path / "r"
    run.mkdir()
    with FileLock(run / ".lock"):
        refused(cli("sweep", "--model", str(model_dir), "--out", str(run), *FAST), "another phasescope process")
    assert cli("sweep", "--model", str(model_dir), "--out", str(run), *FAST).exit_code == 0


# 9. training and sweep options that used to be ignored
def train(out, *extra: str, steps: int = 8):
    """`phasescope train tiny-s4` for a few steps (checkpoint every 2) into ``out``."""
    args = [*TRAIN_FAST, "--set", f"steps={steps}", "--set", "checkpoint_every=2", "--no-progress"]
    return cli("train", "tiny-s4", *args, *extra, "--out", str(out))


def test_training_option_mistakes(tmp_path):
    out = tmp_path / "t"
    assert train(out, "--stop-after", "10", steps=12).exit_code == 0
    refused(train(out, "--stop-after", "5", "--resume", steps=12), "already at step 10")
    refused(train(tmp_path / "missing", "--resume"), "nothing to resume")
    (out / "train_config.json").unlink()
    refused(train(out, "--resume", steps=12), "no train_config.json")
    refused(cli("train", "tiny-s4", "--set", "name=../x", "--no-progress"), "name")


def test_probe_file_with_the_wrong_probe_is_refused(tmp_path, model_dir):
    probe = tmp_path / "p.json"
    probe.write_text(json.dumps({"prompt": "x{pad}", "candidates": {"right": "1"}}))
    result = cli("sweep", "--model", str(model_dir), "--out", str(tmp_path / "r"), "--probe-file", str(probe), *FAST)
    refused(result, "--probe-file: not used by the kv-retrieval probe; drop it")


def test_a_missing_manifest_is_recreated_only_when_no_record_needs_it(swept, model_dir, tmp_path):
    """Records without the manifest that names their weights are refused (resuming could mix two
    models); --adopt-records vouches for them and writes a new manifest; a run without records just
    gets one."""
    (swept / "manifest.json").unlink()
    refused(cli("sweep", "--model", str(model_dir), "--out", str(swept), *FAST), "no manifest.json", "--adopt-records")
    assert cli("sweep", "--model", str(model_dir), "--out", str(swept), "--adopt-records", *FAST).exit_code == 0
    assert json.loads((swept / "manifest.json").read_text())["model_fingerprint"].startswith("sha256:")
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    shutil.copy(swept / "spec.json", fresh / "spec.json")  # a run stopped before its first record
    assert cli("sweep", "--model", str(model_dir), "--out", str(fresh), *FAST).exit_code == 0
    assert (fresh / "manifest.json").exists()


# 10. a trained model is never overwritten
@pytest.mark.parametrize("extra", [[], ["--stop-after", "2"]])
def test_train_never_overwrites_a_model_it_did_not_create(tmp_path, extra):
    out = tmp_path / "model"
    shutil.copytree(ASSETS / "tiny-s4", out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    args = [*TRAIN_FAST, "--set", "steps=4", *extra, "--out", str(out), "--no-progress"]
    refused(cli("train", "tiny-s4", *args), "already holds a run")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


# 11. tracebacks that became messages
def test_damaged_training_runs_give_clear_errors(tmp_path):
    out = tmp_path / "t"
    assert train(out, "--stop-after", "4").exit_code == 0
    with (out / "log.jsonl").open("a") as f:
        f.write('{"step": 4, "lo')  # a partial line: repaired on resume
    (out / "checkpoints" / "step-old").mkdir()  # a stray directory: ignored
    assert train(out, "--stop-after", "6", "--resume").exit_code == 0
    (out / "checkpoints" / "step-6" / "state.json").write_text("{garbage")
    refused(train(out, "--resume"), "state.json", "not valid JSON")
    (out / "checkpoints" / "step-6" / "state.json").unlink()
    refused(train(out, "--resume"), "state.json", "missing")
    (out / "train_config.json").write_text("[]")
    refused(train(out, "--resume"), "train_config.json", "JSON object")
    refused(train(tmp_path / "t" / "log.jsonl"), "is a file")


def test_disk_full_while_checkpointing_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    import errno

    import phasescope.train.checkpoint as checkpoint

    out = tmp_path / "t"
    assert train(out, "--stop-after", "2").exit_code == 0

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(out / "checkpoints"))

    monkeypatch.setattr(checkpoint, "save_model", full)
    refused(train(out, "--resume"), "No space left on device")
    monkeypatch.undo()
    assert (out / "checkpoints" / "LATEST").read_text().strip() == "step-2"
    assert train(out, "--resume").exit_code == 0  # and it continues from there


def test_hf_deepseek_v4_with_a_scheme_transformers_lacks_is_refused_before_writing(tmp_path):
    result = cli("train", "hf-deepseek-v4-tiny", "--set", "scheme.pooler=mean", "--out", str(tmp_path / "t"))
    refused(result, "pooler=channel_gate")
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize(
    "config, phrase",
    [("{}", "missing keys ['vocab_size']"), ('{"vocab_size": "64"}', "vocab_size must be an integer"), ("[", "JSON")],
)
def test_a_broken_model_config_is_named(model_dir, tmp_path, config, phrase):
    (model_dir / "model_config.json").write_text(config)
    refused(cli("sweep", "--model", str(model_dir), "--out", str(tmp_path / "r"), *FAST), phrase)


def test_a_train_config_without_task_and_truncated_weights_are_named(model_dir, tmp_path):
    config = json.loads((model_dir / "train_config.json").read_text())
    del config["task"]
    (model_dir / "train_config.json").write_text(json.dumps(config))
    refused(cli("sweep", "--model", str(model_dir), "--out", str(tmp_path / "r"), *FAST), "has no task")
    shutil.copy(ASSETS / "tiny-s4" / "train_config.json", model_dir / "train_config.json")
    data = (model_dir / "model.safetensors").read_bytes()
    (model_dir / "model.safetensors").write_bytes(data[: len(data) // 2])
    refused(cli("sweep", "--model", str(model_dir), "--out", str(tmp_path / "r"), *FAST), "model.safetensors")


def test_truncated_hf_weights_are_named(tmp_path):
    from hf_models import tiny_qwen3

    tiny_qwen3(tmp_path / "m")
    weights = tmp_path / "m" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    result = cli("sweep", "--model", f"hf:{tmp_path / 'm'}", "--step", "4", "--out", str(tmp_path / "r"), *FAST)
    refused(result, "cannot load it")


@pytest.mark.parametrize(
    "probe, phrase",
    [
        ({"prompt": 5, "candidates": {"right": "8"}}, "prompt must be text"),
        ({"prompt": "x{pad}", "candidates": {"right": ""}}, "non-empty answer"),
        ({"prompt": "x{pad}", "candidates": {"right": "1"}, "colour": 1}, "unknown keys ['colour']"),
    ],
)
def test_bad_probe_files_are_refused_and_leave_no_run_directory(tmp_path, probe, phrase):
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(probe))
    result = cli(
        "sweep",
        "--model",
        str(ASSETS / "tiny-s4"),
        "--probe",
        "padding-completion",
        "--probe-file",
        str(path),
        "--out",
        str(tmp_path / "r"),
        *FAST,
    )
    refused(result, phrase)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "edit, phrase",
    [
        (lambda r: "[1]", "must be a JSON object"),
        (lambda r: json.dumps(r | {"content_id": "zero"}), "mix content ids"),
        (lambda r: json.dumps(r | {"logprobs": [1, 2]}), "logprobs"),
        (lambda r: json.dumps(r | {"logprob_target": None}), "logprob_target"),
    ],
)
def test_damaged_records_are_named_by_line(swept, edit, phrase):
    lines = (swept / "records.jsonl").read_text().splitlines()
    lines[5] = edit(json.loads(lines[5]))
    (swept / "records.jsonl").write_text("\n".join(lines) + "\n")
    refused(cli("analyze", str(swept)), phrase)


def test_empty_or_garbage_metrics_are_recomputed_by_report(swept):
    for content in ("{}", "garbage"):
        (swept / "metrics.json").write_text(content)
        assert cli("report", str(swept)).exit_code == 0
        assert json.loads((swept / "metrics.json").read_text())["n_records"] == 96


def test_demo_mistakes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli("demo", "--samples", "8").exit_code == 0
    refused(cli("demo", "--samples", "9"), "holds a different sweep")
    (tmp_path / "file").write_text("x")
    refused(cli("demo", "--out", "file"), "file")


def test_garbage_json_errors_name_the_file(swept):
    (swept / "spec.json").write_text("{oops")
    refused(cli("analyze", str(swept)), str(swept / "spec.json"), "not valid JSON")


@pytest.mark.parametrize(
    ("args", "phrases"),
    [
        (["--out", ""], ["--out '' is not a run directory"]),
        (["--samples", "99999999999999999999"], ["--samples 99999999999999999999 is invalid; allowed: 1 to 100,000"]),
        (["--samples", "abc"], ["Invalid value for '--samples'", "(see `phasescope sweep --help`)"]),
        (["--step", "0"], ["Invalid value for '--step'"]),
        (["--kv-gaps", "0,1000"], ["--kv-gaps 0,1000: a gap of 1000 tokens", "use gaps of at most"]),
        # one gap alone used to be blamed on the offsets, a huge raw window too (#44 part 6)
        (["--kv-gaps", "1000000"], ["--kv-gaps 1000000: a gap of 1000000 tokens", "use gaps of at most"]),
        (["--local", "100000000"], ["raw window + one compression window", "a smaller --local"]),
    ],
    ids=["empty-out", "huge-samples", "samples-abc", "step-0", "huge-kv-gap", "only-a-huge-kv-gap", "huge-local"],
)
def test_sweep_input_mistakes_are_one_line_errors_that_name_the_option(tmp_path, model_dir, monkeypatch, args, phrases):
    """Second pass of the fault matrix (issue #22): each case an `error:` line naming the option, nothing
    written (an empty --out used to write the run into the current directory; huge --samples hung)."""
    monkeypatch.chdir(tmp_path)
    out = ["--out", str(tmp_path / "run")] if "--out" not in args else []
    result = cli("sweep", "--model", str(model_dir), *out, *args)
    refused(result, *phrases)
    assert "╭" not in result.output and not (tmp_path / "run").exists() and not (tmp_path / "records.jsonl").exists()


def test_savings_bounds_its_token_count():
    refused(cli("savings", "--tokens", "99999999999999999999"), "Invalid value for '--tokens'")


def test_messages_name_the_real_cause(tmp_path, swept, model_dir):
    """A resume with another --batch-size shows both values; prompts:DIR says it is a directory;
    preferences --run on a missing directory says so before the model runs (it used to say
    "run analyze first")."""
    refused(
        cli("sweep", "--model", str(model_dir), "--out", str(swept), *FAST, "--batch-size", "3"),
        "batch_size: 16 in the run, 3 now",
        "its command is in manifest.json",
    )
    refused(
        cli(
            "sweep",
            "--model",
            str(model_dir),
            "--out",
            str(tmp_path / "p"),
            "--probe",
            f"prompts:{tmp_path}",
            "--tokenizer",
            "deepseek-v4",
        ),
        "is a directory; pass --probe prompts:FILE.jsonl",
    )
    refused(cli("preferences", "--model", str(model_dir), "--run", str(tmp_path / "missing")), "does not exist")


@pytest.mark.parametrize("step", [2, 10**12, -5, "4", True])
def test_a_checkpoint_whose_state_step_is_not_its_own_is_refused(tmp_path, step):
    """state.json's step must be the N of step-N and within the recipe; otherwise --resume would
    continue from the wrong step and export a model unlike the uninterrupted run."""
    out = tmp_path / "t"
    assert train(out, "--stop-after", "4").exit_code == 0
    state = out / "checkpoints" / "step-4" / "state.json"
    state.write_text(json.dumps(json.loads(state.read_text()) | {"step": step}))
    refused(train(out, "--resume"), f"says step {step!r}", "step-4 of a 8-step recipe", "delete")
    assert not (out / "model.safetensors").exists()


def test_an_optimizer_state_from_another_checkpoint_is_refused(tmp_path):
    out = tmp_path / "t"
    assert train(out, "--stop-after", "4").exit_code == 0
    shutil.copy(out / "checkpoints" / "step-2" / "optimizer.pt", out / "checkpoints" / "step-4" / "optimizer.pt")
    refused(train(out, "--resume"), "has taken 2 optimizer steps where step-4 needs 4")


def test_a_malicious_optimizer_file_is_not_loaded_and_no_unsafe_advice_is_given(tmp_path):
    import torch

    out = tmp_path / "t"
    assert train(out, "--stop-after", "4").exit_code == 0

    class Payload:
        def __reduce__(self):
            return (shutil.rmtree, (str(tmp_path / "victim"),))

    (tmp_path / "victim").mkdir()
    torch.save({"state": Payload()}, out / "checkpoints" / "step-4" / "optimizer.pt")
    result = train(out, "--resume")
    refused(result, "weights-only load refuses", "not loaded")
    assert "weights_only=False" not in result.output and (tmp_path / "victim").is_dir()


def test_a_full_disk_inside_torch_save_is_named_and_leaves_no_half_checkpoint(tmp_path, monkeypatch):
    import phasescope.train.checkpoint as checkpoint

    out = tmp_path / "t"
    assert train(out, "--stop-after", "2").exit_code == 0

    def full(*args, **kwargs):
        raise RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 969152 vs 969040")

    monkeypatch.setattr(checkpoint.torch, "save", full)
    refused(train(out, "--resume"), "could not write checkpoint", "no space left", "step-2 is intact", "--resume")
    monkeypatch.undo()
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["LATEST", "step-2"]
    assert train(out, "--resume").exit_code == 0


# 12. counts bounded by this machine's memory, refused before any work with the largest that fits
@pytest.fixture
def eight_gib(monkeypatch):
    import phasescope.limits

    monkeypatch.setattr(phasescope.limits, "available_bytes", lambda: 8 * 2**30)


@pytest.mark.parametrize(
    "args, phrases",
    [
        (["theory", "--starts", "1000000000"], ["--starts 1000000000 needs about", "largest that fits is --starts"]),
        (["theory", "--step", "1000000"], ["--step"]),
        (
            ["cache-demo", "--tokens", "1000000000000"],
            ["--tokens 1000000000000 needs", "largest that fits is --tokens"],
        ),
        (["preferences", "--model", str(ASSETS / "tiny-s4"), "--rows", "1000000000"], ["largest that fits is --rows"]),
    ],
)
def test_counts_beyond_memory_are_refused_before_any_work(eight_gib, args, phrases):
    import time

    began = time.monotonic()
    refused(cli(*args), *phrases)
    assert time.monotonic() - began < 20


def test_the_largest_count_named_fits_and_one_more_does_not(eight_gib):
    import re

    from phasescope.errors import InputError
    from phasescope.limits import refuse_beyond_memory

    def need(n):
        return 1000.0 * n**2

    with pytest.raises(InputError) as err:
        refuse_beyond_memory("--n", 10**9, need)
    largest = int(re.search(r"largest that fits is --n (\d+)", str(err.value)).group(1))
    refuse_beyond_memory("--n", largest, need)  # passes
    with pytest.raises(InputError):
        refuse_beyond_memory("--n", largest + 1, need)


@pytest.mark.parametrize("offsets", ["0:100000000", "0:200000"])
def test_huge_offset_ranges_are_refused_at_once(eight_gib, tmp_path, model_dir, offsets):
    import time

    began = time.monotonic()
    refused(cli("sweep", "--model", str(model_dir), "--out", str(tmp_path / "r"), "--offsets", offsets, "--dry-run"))
    assert time.monotonic() - began < 30 and not (tmp_path / "r").exists()


def test_a_prompt_longer_than_the_model_is_refused_before_padding_is_searched(tmp_path):
    import time

    from hf_models import tiny_qwen3, word_tokenizer

    model = tiny_qwen3(tmp_path / "m", word_tokenizer(), max_position_embeddings=512)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"prompt": "a " * 5000 + "Q: b?\nA:", "answer": " c"}) + "\n")
    began = time.monotonic()
    result = cli(
        "sweep",
        "--model",
        f"hf:{model}",
        "--step",
        "4",
        "--probe",
        f"prompts:{prompts}",
        "--out",
        str(tmp_path / "r"),
        "--dry-run",
    )
    refused(result, "more than the model's 512", "nothing is truncated")
    assert time.monotonic() - began < 30


# 13. broken or unsafe model directories and recipes: one error naming the file, nothing run or loaded unsafely
def _damaged(qwen3_dir, tmp_path, damage):
    directory = tmp_path / "m"
    shutil.copytree(qwen3_dir, directory)
    damage(directory)
    return cli("sweep", "--model", f"hf:{directory}", "--step", "4", "--out", str(tmp_path / "r"), "--dry-run")


def _pickle_only(d):
    torch.save(load_file(d / "model.safetensors"), d / "pytorch_model.bin")
    (d / "model.safetensors").unlink()


def _edit_config(**changes):
    def edit(d):
        config = json.loads((d / "config.json").read_text())
        config.update(changes)
        config.pop("layer_types", None)
        (d / "config.json").write_text(json.dumps(config))

    return edit


@pytest.mark.parametrize(
    "damage, phrases",
    [
        (_pickle_only, ["no *.safetensors weights", "pytorch_model.bin", "never loads"]),
        (lambda d: (d / "tokenizer.json").write_text('{"version": "1.0", "model": 5'), ["its tokenizer cannot be"]),
        (_edit_config(rms_norm_eps=float("nan")), ["NaN or infinite logits", "rms_norm_eps"]),
        (_edit_config(num_hidden_layers=10**6), ["config.json (about", "parameters) needs about"]),
        (_edit_config(num_hidden_layers=0), ["num_hidden_layers = 0", "at least one layer"]),
    ],
    ids=["pickle-only", "broken-tokenizer", "nan-eps", "million-layers", "no-layers"],
)
def test_broken_or_unsafe_hf_directories_are_named(eight_gib, qwen3_dir, tmp_path, damage, phrases):
    result = _damaged(qwen3_dir, tmp_path, damage)
    refused(result, *phrases)
    assert "bidirectional" not in result.output and not (tmp_path / "r").exists()


def test_a_native_config_far_larger_than_its_weights_is_refused_before_building(eight_gib, tmp_path, model_dir):
    config = json.loads((model_dir / "model_config.json").read_text())
    config["layers"] = config["layers"][:1] * 10**5
    (model_dir / "model_config.json").write_text(json.dumps(config))
    refused(
        cli("sweep", "--model", str(model_dir), "--out", str(tmp_path / "r"), *FAST), "100000 layers", "needs about"
    )


@pytest.mark.parametrize(
    "setting, phrase",
    [("lr=1e308", "lr=1e+308 is invalid"), ("model.d_model=1000000", "parameters"), ("batch_size=100000000", "needs")],
)
def test_recipes_beyond_bounds_are_refused_before_writing(eight_gib, tmp_path, setting, phrase):
    args = ["--set", setting, "--set", "steps=4", "--set", "warm_start_steps=0", "--no-progress"]
    refused(cli("train", "tiny-s4", *args, "--out", str(tmp_path / "t")), phrase)
    assert not (tmp_path / "t").exists()


def test_a_damaged_manifest_is_explained_without_advising_to_delete_records(swept, model_dir):
    records = (swept / "records.jsonl").read_text()
    (swept / "manifest.json").write_text('{"model_fingerprint": "sha')
    result = cli("sweep", "--model", str(model_dir), "--out", str(swept), *FAST)
    refused(result, "not valid JSON", "records are kept", "move manifest.json aside", "--adopt-records")
    assert f"delete {swept}" not in result.output
    (swept / "manifest.json").rename(swept / "manifest.json.damaged")  # as the message says
    assert cli("sweep", "--model", str(model_dir), "--out", str(swept), "--adopt-records", *FAST).exit_code == 0
    assert (swept / "records.jsonl").read_text() == records  # nothing rescored, nothing lost


@pytest.mark.parametrize("command", ["analyze", "report", "export"])
def test_a_full_disk_names_the_file_and_leaves_nothing_half_written(swept, monkeypatch, command):
    """Every file a command writes goes through rundir.files' atomic writes: on ENOSPC the error
    names the file and the fix, and no temp file or partial figure/export is left behind."""
    import errno
    import os

    import phasescope.rundir.files

    real = os.fdopen

    class Full:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(phasescope.rundir.files.os, "fdopen", lambda fd, mode: Full(real(fd, mode)))
    before = {p.relative_to(swept) for p in swept.rglob("*")}
    result = cli(command, str(swept))
    refused(result, "No space left on device", str(swept), "free space")
    monkeypatch.undo()
    after = {p.relative_to(swept) for p in swept.rglob("*") if p.is_file()}
    assert not [p for p in after if p.name.endswith(".tmp")]
    assert all(p.stat().st_size > 0 for p in swept.rglob("*") if p.is_file() and p.relative_to(swept) not in before)


def test_phasescope_json_cannot_contradict_the_compression_the_config_runs(tmp_path):
    """A DeepSeek-V4 export whose phasescope.json says step 8 while config.json computes step 4 is
    refused naming both, instead of counting phases mod 8."""
    model = tmp_path / "m"
    shutil.copytree(ASSETS / "deepseek-v4-tiny", model)
    meta = json.loads((model / "phasescope.json").read_text())
    meta["compression"] = {**meta.get("compression", {}), "step": 8}
    (model / "phasescope.json").write_text(json.dumps(meta))
    result = cli("sweep", "--model", f"hf:{model}", "--out", str(tmp_path / "r"), "--dry-run", *FAST)
    refused(result, "disagree on the compression", "step 8 in phasescope.json, 4 in config.json")


def test_a_broken_latest_points_at_the_intact_checkpoints(tmp_path):
    out = tmp_path / "t"
    assert train(out, "--stop-after", "4").exit_code == 0
    (out / "checkpoints" / "LATEST").write_text("")
    refused(train(out, "--resume"), "names nothing", "write the newest intact checkpoint's name (step-4)")
    (out / "checkpoints" / "LATEST").write_text("step-4")
    state = out / "checkpoints" / "step-4" / "state.json"
    state.write_text(json.dumps(json.loads(state.read_text()) | {"compressed": "yes"}))
    refused(train(out, "--resume"), "compressed is 'yes', not true or false")


def test_an_ensemble_pad_id_without_the_ensemble_is_refused(model_dir, tmp_path):
    result = cli("sweep", "--model", str(model_dir), "--out", str(tmp_path / "r"), "--ensemble-pad-id", "3", *FAST)
    refused(result, "--ensemble-pad-id", "add --phase-ensemble")


def test_a_raw_window_smaller_than_the_models_is_refused(model_dir, tmp_path):
    """--local below the model's own L would let a needle sit in the raw window; a larger one is kept and labelled."""
    refused(cli("sweep", "--model", str(model_dir), "--out", str(tmp_path / "r"), "--local", "0", *FAST), "--local 0")
    result = cli("sweep", "--model", str(model_dir), "--out", str(tmp_path / "r"), "--local", "12", "--dry-run", *FAST)
    assert result.exit_code == 0 and "L from --local" in result.output, result.output


def test_candidates_that_tokenize_to_the_same_ids_are_refused(tmp_path):
    """A tokenizer that does not know the text maps every candidate to one id: nothing could be scored apart."""
    from phasescope.errors import ProbeError
    from phasescope.probes.base import ProbeItem
    from phasescope.run.checks import SweepChecks
    from phasescope.specs import Geometry

    checks = SweepChecks(Geometry(4, 4, 0, None, "test"), None, None)
    same = ProbeItem(0, 0, [5, 6, 7], {"a": [0], "b": [0]}, "a", 3, 3)
    with pytest.raises(ProbeError, match="every candidate tokenizes to the same ids"):
        checks.add([same])


@pytest.mark.parametrize(("command", "fix"), [("analyze", "cp -r RUN COPY"), ("sweep", "choose another --out")])
def test_a_read_only_place_gets_advice_the_command_can_follow(swept, monkeypatch, command, fix):
    """analyze and report write into the run they are given (no --out to choose): a read-only run
    is answered with copying it; sweep, which has --out, with choosing another."""
    import errno

    import phasescope.rundir.files

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(swept / "x.tmp"))

    monkeypatch.setattr(phasescope.rundir.files.tempfile, "mkstemp", read_only)
    fresh = ["--model", str(ASSETS / "tiny-s4"), "--out", str(swept.parent / "fresh"), *FAST]
    args = [str(swept)] if command == "analyze" else fresh
    result = cli(command, *args)
    refused(result, "Read-only file system", fix)
    assert ("--out" in result.output) == (command == "sweep")


def test_a_spec_from_a_newer_phasescope_is_refused_not_misread(swept):
    spec = json.loads((swept / "spec.json").read_text())
    (swept / "spec.json").write_text(json.dumps(spec | {"schema": 99}))
    refused(cli("analyze", str(swept)), "schema 99 is not a layout this phasescope reads", "upgrade phasescope")
    again = cli("sweep", "--model", str(ASSETS / "tiny-s4"), "--out", str(swept), *FAST)
    refused(again, "schema 99")


def test_a_record_whose_phase_contradicts_its_anchor_is_refused(swept):
    lines = (swept / "records.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    record["phase"] = (record["phase"] + 1) % record["step"]
    (swept / "records.jsonl").write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    refused(cli("analyze", str(swept)), "line 1", f"but its anchor_pos {record['anchor_pos']}", "fix or delete")


@pytest.mark.parametrize("name", ["records.jsonl", "spec.json"])
def test_a_key_given_twice_is_refused_not_resolved_silently(swept, name):
    """json keeps the last of two equal keys: '"correct": true, "correct": false' would be read as
    false without a word. Both files refuse it, naming the key."""
    path = swept / name
    text = path.read_text()
    field = '"correct": ' if name == "records.jsonl" else '"seed": '
    at = text.index(field)
    path.write_text(text[:at] + field + "true, " + text[at:])
    refused(cli("analyze", str(swept)), str(path), "'" + field.split('"')[1] + "' appears twice")


def test_log_samples_writes_each_records_prompt_and_export_joins_them(tmp_path, model_dir):
    """sweep --log-samples: samples.jsonl holds one line per record with the prompt ids it was scored
    on (the probe's own items), kept across a resume; export adds them to the records table."""

    from phasescope.export import load_run

    run = tmp_path / "run"
    args = ["sweep", "--model", str(model_dir), "--out", str(run), "--offsets", "0:8", "--log-samples", *FAST]
    assert cli(*args).exit_code == 0
    lines = (run / "samples.jsonl").read_text().splitlines()
    records = (run / "records.jsonl").read_text().splitlines()
    assert len(lines) == len(records) == 32
    samples = [json.loads(line) for line in lines]
    for sample, record in zip(samples, map(json.loads, records), strict=True):
        assert (sample["content_id"], sample["offset"]) == (record["content_id"], record["offset"])
        assert len(sample["prompt_ids"]) == record["answer_pos"]  # the answer follows the prompt
        assert sample["candidates"][sample["target"]] and sample["prompt_text"] is None  # ids only: no tokenizer
        assert sample["answer_ids"] == record["answer_ids"] and sample["correct"] == record["correct"]
        assert record["correct"] == (record["answer_ids"] == sample["candidates"][sample["target"]])
    first = samples[0]
    anchors = [json.loads(r)["anchor_pos"] for r in records]  # the needle's key moves with the offset, intact
    content_0 = [(s, a) for s, a in zip(samples, anchors, strict=True) if s["content_id"] == 0]
    assert len({s["prompt_ids"][a] for s, a in content_0}) == 1 and len(content_0) == 8
    assert len({tuple(s["candidates"][s["target"]]) for s, _ in content_0}) == 1  # one answer at every offset
    kept = records[:20]
    (run / "records.jsonl").write_text("\n".join(kept) + "\n")
    assert cli(*args).exit_code == 0  # resumes: only the 12 missing records are scored and logged again
    assert len((run / "samples.jsonl").read_text().splitlines()) == 32 + 12
    table = load_run(run).records
    assert table["prompt_ids"].notna().all() and len(table) == 32
    assert cli("export", str(run)).exit_code == 0  # a kv-retrieval run has no lm-eval task metrics: no such file
    assert sorted(p.name for p in (run / "export").iterdir()) == ["offsets.csv", "phases.csv", "records.csv"]
    assert table["prompt_ids"].iloc[0] == first["prompt_ids"]  # a list, not its text (#46 part 10)
    csv = (run / "export" / "records.csv").read_text().splitlines()
    assert json.dumps(first["prompt_ids"]) in csv[1] or f'"{json.dumps(first["prompt_ids"])}"' in csv[1]
    assert cli("export", str(run), "--format", "parquet", "--out", str(tmp_path / "pq")).exit_code == 0
    import pandas as pd

    typed = pd.read_parquet(tmp_path / "pq" / "records.parquet")
    assert list(typed["prompt_ids"].iloc[0]) == first["prompt_ids"]


def test_load_run_gives_missing_numbers_as_nan_in_float_columns(swept):
    """A per-phase interval withheld (4 contents) is NaN in a float column, not None in an
    object column pandas cannot average or plot."""
    from phasescope.export import load_run

    phases = load_run(swept).phases
    assert phases["ci_low"].dtype == float and phases["ci_low"].isna().all() and phases["accuracy"].dtype == float
    assert phases["ci_low"].mean() != phases["ci_low"].mean()  # NaN, computed without a TypeError


@pytest.mark.parametrize("command", ["export", "compare"])
def test_a_read_only_run_is_read_into_another_out_with_its_statistics_in_memory(swept, tmp_path, monkeypatch, command):
    """export and compare write only to their --out: a run that cannot be written to (its stale
    metrics.json not replaceable) is analyzed in memory with a warning; before, they failed with
    'choose another --out' although --out was elsewhere (#44 part 6)."""
    import errno
    import shutil

    import phasescope.results

    run = tmp_path / "read-only"
    shutil.copytree(swept, run)
    (run / "metrics.json").unlink(missing_ok=True)
    write = phasescope.results.atomic_write_text

    def read_only_run(path, text):
        if run in path.parents:
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return write(path, text)

    monkeypatch.setattr(phasescope.results, "atomic_write_text", read_only_run)
    out = tmp_path / "elsewhere"
    args = [str(run), "--out", str(out)] if command == "export" else [str(run), str(swept), "--out", str(out)]
    result = cli(command, *args)
    assert result.exit_code == 0, result.output
    assert "computed in memory and not kept" in result.output and not (run / "metrics.json").exists()
    assert any(out.iterdir())


def test_a_full_disk_while_records_are_appended_names_the_records_file(tmp_path, monkeypatch):
    """A full disk raises ENOSPC from the write, which names no file: the error said 'No space
    left on device' alone (#44 part 6); it names records.jsonl and the fix, and the run resumes."""
    import errno
    from pathlib import Path

    real_open = Path.open

    def full(self, mode="r", *args, **kwargs):
        if mode == "a" and self.name == "records.jsonl":

            class Full:
                def __enter__(self):
                    return self

                def __exit__(self, *exc):
                    return False

                def write(self, data):
                    raise OSError(errno.ENOSPC, "No space left on device")

            return Full()
        return real_open(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", full)
    out = tmp_path / "run"
    result = cli("sweep", "--model", str(ASSETS / "tiny-s4"), "--out", str(out), *FAST)
    refused(result, "No space left on device", str(out / "records.jsonl"), "free space")
    monkeypatch.undo()
    again = cli("sweep", "--model", str(ASSETS / "tiny-s4"), "--out", str(out), *FAST)
    assert again.exit_code == 0, again.output


def test_export_into_an_existing_file_is_refused_before_the_run_is_read(swept, tmp_path):
    """It ended in a bare 'File exists' (#44 part 6)."""
    taken = tmp_path / "taken.json"
    taken.write_text("{}")
    refused(cli("export", str(swept), "--out", str(taken)), f"--out {taken} is a file", "--format lm-eval")
    assert taken.read_text() == "{}"


DEMO = "src/phasescope/assets/demo/tiny-s4"


@pytest.mark.parametrize(
    ("offsets", "said"),
    [("-1:7", "-1 is negative"), ("8:0", "0 is not above 8"), ("3,-2", "-2 is negative"), ("4:4", "4 is not above 4")],
)
def test_offsets_that_are_negative_or_reversed_say_so(offsets, said):
    """Issue #57: both read "use start:stop (e.g. 0:24)", which they were."""
    result = CliRunner().invoke(app, ["sweep", "--model", DEMO, "--offsets", offsets, "--out", "x"])
    assert result.exit_code == 2 and said in " ".join(result.output.split()), result.output


def test_an_out_that_is_a_dangling_link_is_named_as_one(tmp_path):
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere" / "run")
    result = CliRunner().invoke(app, ["sweep", "--model", DEMO, "--samples", "1", "--out", str(link)])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and f"is a link to {tmp_path / 'nowhere' / 'run'}, which does not exist" in said
    assert "File exists" not in said


def test_paired_runs_name_an_edited_digest_and_two_halves_of_one_sweep(tmp_path):
    import phasescope
    from phasescope.analysis.paired import pair_records
    from phasescope.errors import InputError
    from phasescope.rundir.records import Record

    records = phasescope.sweep(DEMO, samples=4, offsets=range(8)).records
    edited = [Record(**{**r.__dict__, "prompt_digest": None}) if i == 3 else r for i, r in enumerate(records)]
    with pytest.raises(InputError, match=r"\(line 4 of its records.jsonl\) lacks its prompt digest, which the run's"):
        pair_records(records, edited)
    first, second = records[:16], records[16:]
    with pytest.raises(InputError, match="share no record .* two parts of one sweep"):
        pair_records(first, second)
