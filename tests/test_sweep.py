"""The sweep end to end: planted model, resumable run directory, clear errors."""

import json

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import phasescope
from phasescope.backends import from_callable
from phasescope.data.retrieval import QUERY, RetrievalTask
from phasescope.errors import InputError
from phasescope.probes import ProbeError
from phasescope.rundir.metrics import Metrics

TASK = RetrievalTask(
    n_keys=32, n_values=32, n_filler=8, n_pairs=16, n_queries=8, max_gap=2, min_distance=8, seq_len=128
)


class Planted:
    """A planted model for the retrieval probe: it answers right unless the needle's value sits
    at ``bad_phase`` (mod ``step``), where it guesses the first value (None: always right)."""

    def __init__(self, step: int, bad_phase: int | None):
        self.step, self.bad_phase = step, bad_phase

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros(*ids.shape, TASK.vocab_size)
        for b, row in enumerate(ids.tolist()):
            end = len(row) - 1
            while row[end] == 0:  # right padding
                end -= 1
            assert row[end - 1] == QUERY
            pos = max(p for p in range(1, end - 1) if row[p] == row[end])  # the needle's key in the haystack
            wrong = self.bad_phase is not None and (pos + 1) % self.step == self.bad_phase
            logits[b, end, TASK.value_ids[0] if wrong else row[pos + 1]] = 10.0
        return logits


class PhaseBlindAtBoundary(Planted):
    """Blind at phase 3 of step 4: a planted 100 pp gap."""

    def __init__(self):
        super().__init__(4, 3)


def planted_model():
    return from_callable(PhaseBlindAtBoundary(), vocab_size=TASK.vocab_size, step=4, align=0)


def test_planted_model_gives_period_four_and_full_gap(tmp_path):
    phasescope.sweep(planted_model(), task=TASK, samples=12, out=tmp_path, design="pad-prefix")  # 10+: tested
    metrics = phasescope.analyze(tmp_path, n_resamples=300)
    assert metrics.period.detected == 4
    assert [round(r.accuracy, 3) for r in metrics.phases][3] < 0.2
    assert metrics.gap_pp > 80
    record = json.loads((tmp_path / "records.jsonl").read_text().splitlines()[0])
    for field in (
        "content_id",
        "offset",
        "phase",
        "step",
        "align",
        "anchor_pos",
        "key_pos",
        "value_pos",
        "answer_pos",
        "same_window",
        "correct",
        "logprob_target",
        "logprobs",
    ):
        assert field in record
    assert {"spec.json", "manifest.json", "records.jsonl", "metrics.json"} <= {p.name for p in tmp_path.iterdir()}


def test_interrupted_sweep_resumes_to_byte_identical_metrics(tmp_path):
    from phasescope.kv import scheme
    from phasescope.model import Decoder, preset

    torch.manual_seed(0)
    model = Decoder(preset("tiny", TASK.vocab_size, scheme("tiny-4")))
    kwargs = dict(task=TASK, samples=4, batch_size=5)
    phasescope.sweep(model, out=tmp_path / "whole", **kwargs)
    phasescope.analyze(tmp_path / "whole", n_resamples=200)

    part = tmp_path / "part"
    phasescope.sweep(model, out=part, **kwargs)
    lines = (part / "records.jsonl").read_text().splitlines(keepends=True)
    (part / "records.jsonl").write_text("".join(lines[:37]) + lines[37][:25])  # killed mid-write
    again = phasescope.sweep(model, out=part, **kwargs)
    assert again.scored == len(lines) - 37
    phasescope.analyze(part, n_resamples=200)
    assert (part / "metrics.json").read_bytes() == (tmp_path / "whole" / "metrics.json").read_bytes()
    assert phasescope.sweep(model, out=part, **kwargs).scored == 0, "a finished run is skipped"

    cut = tmp_path / "no-final-newline"
    phasescope.sweep(model, out=cut, **kwargs)
    (cut / "records.jsonl").write_text("".join(lines[:40]).rstrip("\n"))  # complete records, no final newline
    assert phasescope.sweep(model, out=cut, **kwargs).scored == len(lines) - 40
    assert (cut / "records.jsonl").read_text() == "".join(lines), "the next record was not appended onto the last"


def test_bad_sweeps_fail_before_scoring(tmp_path):
    model = planted_model()
    with pytest.raises(ProbeError, match="fewer than two periods"):
        phasescope.sweep(model, task=TASK, offsets=range(6))
    small = from_callable(PhaseBlindAtBoundary(), vocab_size=20, step=4)
    with pytest.raises(ProbeError, match="vocabulary has 20 ids"):
        phasescope.sweep(small, task=TASK, samples=1)
    with pytest.raises(ProbeError, match="unknown probe"):
        phasescope.sweep(model, probe="haystack", task=TASK)
    with pytest.raises(InputError, match="declares no compression geometry"):
        phasescope.sweep(from_callable(PhaseBlindAtBoundary()), task=TASK)
    phasescope.sweep(model, task=TASK, samples=1, out=tmp_path)
    with pytest.raises(ProbeError, match="holds a different sweep"):
        phasescope.sweep(model, task=TASK, samples=2, out=tmp_path)


def test_cli_sweep_analyze_report_on_a_trained_checkpoint(tmp_path):
    from phasescope.cli import app
    from phasescope.train.config import apply_overrides
    from phasescope.train.recipes import get_recipe
    from phasescope.train.trainer import train

    cfg = apply_overrides(get_recipe("tiny-s4"), ["steps=4", "warm_start_steps=0", "eval_batches=1", "batch_size=8"])
    train(cfg, tmp_path / "model", progress=False)
    runner = CliRunner()
    run = str(tmp_path / "run")
    result = runner.invoke(
        app, ["sweep", "--model", str(tmp_path / "model"), "--out", run, "--samples", "3", "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["analyze", run, "--resamples", "200"], env={"COLUMNS": "150"})
    assert result.exit_code == 0 and "(boundary)" in result.output
    result = runner.invoke(app, ["report", run])
    assert result.exit_code == 0
    page = (tmp_path / "run" / "report.html").read_text()
    # four figures by the needle's phase, and the effect by each factor's phase (the prompt end held:
    # compared between contents)
    assert page.count("data:image/png;base64,") == 5 and "phasescope sweep" in page
    assert 'alt="factor_effects.png"' in page
    bad = runner.invoke(app, ["sweep", "--model", str(tmp_path), "--out", run], env={"COLUMNS": "300"})
    assert bad.exit_code == 2 and "not a phasescope model directory" in bad.output


def test_hf_directory_with_a_tokenizer_is_swept_with_the_text_probe(tmp_path):
    """A tiny transformers Qwen3 saved with a locally trained BPE: hf:DIR -> text kv-retrieval
    and padding-completion, scored end to end (random weights: mechanics, not accuracy)."""
    from hf_models import tiny_qwen3, word_tokenizer

    tiny_qwen3(tmp_path / "m", word_tokenizer())
    result = phasescope.sweep(f"hf:{tmp_path / 'm'}", step=4, samples=2, out=tmp_path / "kv")
    assert len(result.records) == 48 and all(r.same_window is not None for r in result.records)
    assert phasescope.analyze(tmp_path / "kv", n_resamples=100).step == 4


class PhaseProbabilities:
    """A planted model for the code probe: at every position t the next token is the right
    candidate with probability P_RIGHT[phase of t + 1] plus a shift of its own per content
    (from the 12 tokens before t: code after the padding, the same at every offset), else the
    wrong one."""

    P_RIGHT = (0.264, 0.915, 0.6, 0.4)

    def __init__(self, right: int, wrong: int, vocab_size: int):
        self.right, self.wrong, self.vocab_size = right, wrong, vocab_size

    def shift(self, ids: torch.Tensor) -> torch.Tensor:
        total = torch.nn.functional.pad(ids.cumsum(-1), (12, 0))
        last_12 = total[:, 12:] - total[:, :-12]
        return 0.05 * (last_12 % 3 - 1).double()

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        phase = (torch.arange(ids.shape[1]) + 1) % 4
        p = torch.tensor(self.P_RIGHT, dtype=torch.double)[phase] + self.shift(ids)
        logits = torch.full((*ids.shape, self.vocab_size), -30.0, dtype=torch.double)
        logits[..., self.right], logits[..., self.wrong] = p.log(), (1 - p).log()
        return logits.float()


def test_planted_phase_probabilities_of_the_code_probe_are_recovered_with_content_intervals(tmp_path):
    from phasescope.probes import PaddingCompletionProbe
    from phasescope.probes.padding_completion import builtin_contents
    from test_probes import _bpe_tokenizer

    tok = _bpe_tokenizer()
    specs = [
        s for s in builtin_contents(64, np.random.default_rng(0)) if s.name.split("/")[0] in ("fp8-cast", "int8-cast")
    ]
    probe = PaddingCompletionProbe(tok, specs)
    items = [it for it in probe.items(list(range(24)), len(specs), np.random.default_rng(0)) if it.offset == 0]
    assert len(specs) == 16 and {tuple(it.candidates["right"]) for it in items} == {tuple(tok.encode("8").ids)}
    (right,), (wrong,) = (tok.encode(x).ids for x in ("8", "32"))
    model = PhaseProbabilities(right, wrong, tok.get_vocab_size())
    shifts = [float(model.shift(torch.tensor([it.input_ids]))[0, -1]) for it in items]  # one per content
    assert len(set(shifts)) > 1, "contents differ, so intervals have width"
    loaded = from_callable(model, vocab_size=tok.get_vocab_size(), step=4, align=0)
    phasescope.sweep(loaded, "padding-completion", tokenizer=tok, completion=specs, out=tmp_path)
    metrics = phasescope.analyze(tmp_path, n_resamples=300)
    table = metrics.candidate_probabilities
    assert table["candidates"] == ["right", "wrong"] and metrics.n_contents == 16
    # planted: what the model gives on average over these contents (its shifts need not average zero)
    planted = np.array(model.P_RIGHT) + float(np.mean(shifts))
    for row in table["phases"]:
        low, high = row["ci"]["right"]
        assert row["mean"]["right"] == pytest.approx(planted[row["phase"]], abs=1e-4)
        assert low < planted[row["phase"]] < high and high - low > 0
        assert sum(low < v < high for v in planted) == 1, "the interval tells this phase from the others"
    assert [r.accuracy for r in metrics.phases] == [0.0, 1.0, 1.0, 0.0]
    assert metrics.gap_pp == pytest.approx(100) and metrics.gap_p_value is not None


def test_code_probe_sampled_end_to_end_on_a_tiny_hf_model_gives_intervals(tmp_path):
    """`phasescope sweep --probe padding-completion --samples 12` on a tiny transformers Qwen3
    with a local tokenizer, then analyze and report: twelve contents, intervals with width,
    p-values present (random weights: mechanics, not accuracy)."""
    from hf_models import tiny_qwen3, word_tokenizer
    from phasescope.cli import app

    tiny_qwen3(tmp_path / "m", word_tokenizer())
    run, runner = str(tmp_path / "fp8"), CliRunner()
    args = ["sweep", "--model", f"hf:{tmp_path / 'm'}", "--probe", "padding-completion", "--step", "4"]
    result = runner.invoke(app, [*args, "--samples", "12", "--out", run, "--no-progress"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["analyze", run, "--resamples", "200"], env={"COLUMNS": "160"})
    assert result.exit_code == 0 and "P(right) [95%]" in result.output and "P(wrong) [95%]" in result.output
    metrics = Metrics.from_json(json.loads((tmp_path / "fp8" / "metrics.json").read_text()))
    assert metrics.n_contents == 12 and metrics.n_records == 12 * 24
    if metrics.n_informative_contents >= 10:  # random weights often answer every record alike: nothing to test
        assert metrics.gap_p_value is not None and metrics.homogeneity_p_value is not None
    for row in metrics.candidate_probabilities["phases"]:
        low, high = row["ci"]["right"]
        assert high - low > 0 and row["n_contents"] == 12
    spec = json.loads((tmp_path / "fp8" / "spec.json").read_text())["probe"]
    assert len({c["prompt"] for c in spec["contents"]}) == 12
    assert runner.invoke(app, ["report", run]).exit_code == 0
    assert "Mean probability of each candidate per phase" in (tmp_path / "fp8" / "report.html").read_text()


def test_the_code_probe_is_reported_in_the_studys_terms(tmp_path):
    """The FP8 helper on DeepSeek-V4's tokenizer, a planted model: analyze labels the candidates by
    their answers ("8", "32"), shows the '=' count beside the token phase (the records' own), and
    writes a small probability in scientific notation instead of 0.000."""
    from phasescope.backends.tokenizers import named_tokenizer
    from phasescope.cli import app
    from phasescope.probes.padding_completion import CompletionSpec

    tok = named_tokenizer("deepseek-v4")
    right, wrong = (tok.encode(text, add_special_tokens=False)[0] for text in ("8", "32"))

    def model(ids):
        p = torch.tensor([0.264, 0.915, 0.6, 0.0003], dtype=torch.double)[(torch.arange(ids.shape[1]) + 1) % 4]
        logits = torch.full((*ids.shape, len(tok)), -30.0, dtype=torch.double)
        logits[..., right], logits[..., wrong] = p.log(), (1 - p).log()
        return logits.float()

    loaded = from_callable(model, vocab_size=len(tok), step=4, align=0)
    run = tmp_path / "fp8"
    phasescope.sweep(loaded, "padding-completion", tokenizer=tok, completion=[CompletionSpec()], out=run, local=0)
    result = CliRunner().invoke(app, ["analyze", str(run), "--resamples", "200"], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    assert "'=' count" in result.output and 'P(right "8")' in result.output and 'P(wrong "32")' in result.output
    assert "3.00e-04" in result.output
    table = Metrics.from_json(json.loads((run / "metrics.json").read_text())).candidate_probabilities
    assert table["answers"] == {"right": "8", "wrong": "32"} and table["pad_unit"] == "="
    records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    lines = result.output.splitlines()
    below = lines[next(i for i, x in enumerate(lines) if "'=' count" in x) + 1 :]  # the probability table
    for row in table["phases"]:
        units = sorted({r["padding"]["units"] for r in records if r["phase"] == row["phase"]})
        assert row["pad_units"] == units and len(units) == 6  # offsets 0..23: six windows
        line = next(x for x in below if x.strip().startswith(str(row["phase"])))
        assert ", ".join(map(str, units)) in line, "the '=' counts sit beside their token phase"
