"""The Python API as strict as the command line (issue #57 item 7): every public function checks its
arguments and raises InputError naming the argument, and a model callable's output is checked (type,
shape, vocabulary) with the fix named, never a raw TypeError, IndexError or AttributeError."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import phasescope
from phasescope.data.retrieval import RetrievalTask
from phasescope.errors import InputError

DEMO = "src/phasescope/assets/demo/tiny-s4"
TASK = RetrievalTask()
SMALL = dict(step=4, local=8, samples=1, offsets=range(8))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("api") / "run"
    phasescope.sweep(DEMO, samples=2, offsets=range(8), out=out)
    return out


@pytest.mark.parametrize(
    ("call", "said"),
    [
        (lambda run: phasescope.sweep(DEMO, samples=1, offsets=range(8), out=123), "out must be a directory path"),
        (lambda run: phasescope.analyze(123), "run_dir must be a path"),
        (lambda run: phasescope.analyze(run, n_resamples="2000"), "n_resamples must be an integer"),
        (lambda run: phasescope.report(None), "run_dir must be a path"),
        (lambda run: phasescope.compare([run, run], None), "out must be a path"),
        (lambda run: phasescope.sweep(None, samples=1), "model is None"),
        (
            lambda run: phasescope.sweep(lambda ids: torch.randn(*ids.shape, TASK.vocab_size), task="kv", **SMALL),
            "task must be a RetrievalTask",
        ),
    ],
    ids=["sweep-out", "analyze-path", "analyze-resamples", "report-none", "compare-out", "sweep-none", "task"],
)
def test_a_bad_argument_is_named(run, call, said):
    with pytest.raises(InputError, match=said):
        call(run)


@pytest.mark.parametrize(
    ("fn", "said"),
    [
        (lambda ids: np.zeros((*ids.shape, TASK.vocab_size)), r"returned a ndarray; .* \(torch.from_numpy"),
        (lambda ids: torch.zeros(ids.shape[0], TASK.vocab_size), r"returned logits of shape \(1, 75\)"),
        (
            lambda ids: torch.zeros(*ids.shape, 10),
            "returned logits over 10 tokens, but the sweep reads token ids up to",
        ),
    ],
    ids=["numpy", "no-positions", "small-vocabulary"],
)
def test_a_model_callables_output_is_checked_with_the_fix_named(fn, said):
    with pytest.raises(InputError, match=said):
        phasescope.sweep(fn, task=TASK, **SMALL)


def test_the_command_lines_text_for_an_option_is_read_from_python_too():
    """kv_gaps="0,1" was refused as "--kv-gaps '0,1' is invalid; ... e.g. 0,1"."""
    records = phasescope.sweep(DEMO, samples=1, offsets=range(8), kv_gaps="0,1").records
    assert {r.variant for r in records} == {0, 1}


def test_decoder_generate_refuses_a_negative_length():
    from phasescope.kv import scheme
    from phasescope.model import Decoder, preset

    model = Decoder(preset("tiny", vocab_size=64, scheme=scheme("full")))
    with pytest.raises(InputError, match="max_new_tokens must be an integer >= 1, got -1"):
        model.generate(torch.randint(0, 64, (1, 8)), max_new_tokens=-1)
