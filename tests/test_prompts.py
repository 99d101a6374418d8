"""prompts:FILE.jsonl makes any dataset phase-aware: lines are validated with the line named,
each prompt is padded so that offset d puts every answer at phase d mod step, multiple choice
is scored by log-prob and exact match by greedy decoding, on three backends with equal records."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

import phasescope
from phasescope.backends.served import Options as ServedOptions
from phasescope.kv import scheme
from phasescope.model import Decoder, preset
from phasescope.probes import ProbeError
from phasescope.probes.prompts import PromptsProbe, read_prompts

EXAMPLE = Path(__file__).parent.parent / "examples" / "prompts.jsonl"
OFFSETS = list(range(8))


def write(tmp_path, *rows):
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_the_shipped_example_file_reads():
    rows = read_prompts(EXAMPLE)
    assert len(rows) == 24
    assert {r["exact"] for r in rows} == {True, False}


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("{not json", "line 2 is not JSON"),
        ({"prompt": "x"}, "give either 'candidates'"),
        ({"prompt": "x", "candidates": [" a", " b"], "answer": " a"}, "give either 'candidates'"),
        ({"prompt": "x", "candidates": [" a", " b"], "target": " c"}, "'target' ' c' is not a candidate"),
        ({"prompt": "x", "candidates": [" a", " a"], "target": 0}, "two candidates are the same"),
        ({"prompt": "{pad}x{pad}", "answer": " a"}, "more than once"),
        ({"prompt": "x", "answer": " a", "label": 1}, "unknown keys"),
    ],
)
def test_bad_lines_are_refused_naming_the_line(tmp_path, row, message):
    path = write(tmp_path, {"prompt": "ok", "answer": " a"}, row)
    with pytest.raises(ProbeError, match=message):
        read_prompts(path)


def test_targets_by_index_name_or_text():
    rows = [
        {"prompt": "x", "candidates": [" a", " b"], "target": 1},
        {"prompt": "x", "candidates": {"yes": " a", "no": " b"}, "target": "no"},
        {"prompt": "x", "candidates": [" a", " b"], "target": " b"},
    ]
    from phasescope.probes.prompts import _row

    assert [_row(r, "t")["target"] for r in rows] == ["1", "no", "1"]


def test_every_prompt_sits_at_phase_d_mod_step_at_offset_d():
    from hf_models import word_tokenizer

    tok = word_tokenizer()
    probe = PromptsProbe(EXAMPLE, tok, bos_id=tok.bos_token_id, step=4, align=1)
    items = probe.items(OFFSETS, 24, np.random.default_rng(0))
    assert len(items) == 24 * len(OFFSETS)
    for item in items:
        assert (item.answer_pos - 1) % 4 == item.offset % 4
        assert item.padding["text"] in tok.decode(item.input_ids) and item.padding["tokens"] >= item.offset
    with pytest.raises(ProbeError, match="holds 24 prompts"):
        probe.items(OFFSETS, 25, np.random.default_rng(0))


def test_multiple_choice_counts_the_highest_log_prob_and_exact_match_the_greedy_answer(tmp_path):
    from hf_models import word_tokenizer

    tok = word_tokenizer()
    path = write(
        tmp_path,
        {"prompt": "Remember the", "candidates": [" pairs", " vidu"], "target": 0},
        {"prompt": "Remember the", "answer": " pairs"},
    )
    pairs = tok.encode(" pairs", add_special_tokens=False)[0]

    def logits(ids):  # the next token is always " pairs" (probability ~1)
        out = torch.zeros(ids.shape[0], ids.shape[1], len(tok))
        out[..., pairs] = 20.0
        return out

    model = phasescope.backends.from_callable(logits, vocab_size=len(tok), step=4)
    records = phasescope.sweep(model, f"prompts:{path}", tokenizer=tok, offsets=OFFSETS).records
    assert len(records) == 16
    assert all(r.correct for r in records)
    assert {tuple(sorted(r.logprobs)) for r in records} == {("0", "1"), ("answer",)}


def test_the_example_file_gives_equal_records_on_hf_served_and_native(qwen3_dir, tmp_path):
    """hf: directly, the same weights behind an OpenAI-compatible server, and a phasescope
    Decoder given the same tokenizer (its own weights, so only the item layout is compared)."""
    from fake_server import FakeVLLM
    from hf_models import word_tokenizer

    probe = f"prompts:{EXAMPLE}"
    local = phasescope.sweep(f"hf:{qwen3_dir}", probe, step=4, offsets=OFFSETS, out=tmp_path / "hf")
    server = FakeVLLM(AutoModelForCausalLM.from_pretrained(qwen3_dir))
    try:
        options = ServedOptions(tokenizer=str(qwen3_dir), backoff=0.01)
        remote = phasescope.sweep(f"openai:{server.url}#tiny", probe, step=4, offsets=OFFSETS, options=options)
    finally:
        server.close()
    assert len(local.records) == len(remote.records) == 24 * len(OFFSETS)
    for a, b in zip(local.records, remote.records, strict=True):
        assert a.correct == b.correct
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
    tok = word_tokenizer()
    torch.manual_seed(0)
    native = Decoder(preset("tiny", len(tok), scheme("tiny-4", local=8)))
    mine = phasescope.sweep(native, probe, tokenizer=tok, offsets=OFFSETS).records
    assert [(r.content_id, r.offset, r.phase) for r in mine] == [
        (r.content_id, r.offset, r.phase) for r in local.records
    ]
    metrics = phasescope.analyze(tmp_path / "hf", n_resamples=200)
    assert metrics.n_contents == 24
    # two windows of offsets: a drift cannot be told from a period, so no p-value, and the output says why
    assert metrics.period.p_value is None and "3 windows or more" in metrics.period.note


def test_the_cli_sweeps_the_example_file_and_a_long_haystack(qwen3_dir, tmp_path):
    from typer.testing import CliRunner

    from phasescope.cli import app

    runner = CliRunner(env={"COLUMNS": "400"})
    run = tmp_path / "cli"
    args = ["sweep", "--model", f"hf:{qwen3_dir}", "--step", "4", "--offsets", "0:8", "--no-progress"]
    result = runner.invoke(app, [*args, "--probe", f"prompts:{EXAMPLE}", "--out", str(run)])
    assert result.exit_code == 0, result.output
    assert "scored 192 records" in result.output
    labels = (
        "geometry: step s = 4, window w = 4, align 0, raw window L = unknown (labels only: the model is not compressed"
    )
    assert labels in result.output  # the geometry the phases were counted with, and where it came from
    assert f"prompts:{EXAMPLE}" in json.loads((run / "manifest.json").read_text())["command"]
    long = [*args, "--context-tokens", "4096", "--pair-format", "codes", "--out", str(tmp_path / "x"), "--dry-run"]
    result = runner.invoke(app, long)
    assert result.exit_code == 0, result.output
    assert "geometry: step s = 4" in result.output
    longest = int(result.output.split("longest_sequence ")[1].split()[0].replace(",", ""))
    assert 4000 <= longest <= 4096
    bad = runner.invoke(app, [*args, "--probe", "prompts:nowhere.jsonl", "--out", str(tmp_path / "y")])
    assert bad.exit_code == 2 and "does not exist" in bad.output


def test_a_callable_with_a_tokenizer_named_by_a_string_uses_it():
    """``tokenizer="qwen3"`` (or a directory) beside a bare callable is loaded, not ignored."""
    import torch

    from phasescope.backends.tokenizers import named_tokenizer

    vocab = len(named_tokenizer("qwen3"))

    def uniform(ids):
        return torch.zeros(ids.shape[0], ids.shape[1], vocab)

    result = phasescope.sweep(
        uniform, "prompts:examples/prompts.jsonl", tokenizer="qwen3", step=4, samples=2, offsets=range(8), local=0
    )
    assert len(result.records) == 16
