"""Prefix reuse gives the records a plain sweep gives (shift-needle; native decoder and a plain
transformers model), and a sweep interrupted mid-way still resumes to the same records."""

import pytest
import torch

import phasescope
from phasescope.backends.prefix import common_prefix, shared_length
from phasescope.kv import scheme
from phasescope.model import Decoder, preset
from test_sweep import TASK


def assert_same_records(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert (x.content_id, x.offset, x.correct) == (y.content_id, y.offset, y.correct)
        assert x.logprobs == pytest.approx(y.logprobs, abs=1e-5)


@pytest.mark.parametrize("name", ["tiny-4", "v4-csa"])
def test_native_decoder_with_and_without_prefix_reuse(name):
    torch.manual_seed(0)
    model = Decoder(preset("tiny", TASK.vocab_size, scheme(name, local=8)))
    kwargs = dict(task=TASK, samples=5, batch_size=3, local=8)
    reused = phasescope.sweep(model, **kwargs).records
    plain = phasescope.sweep(model, prefix_reuse=False, **kwargs).records
    assert_same_records(reused, plain)


def test_transformers_model_with_and_without_prefix_reuse(tmp_path):
    from hf_models import tiny_qwen3, word_tokenizer

    model = f"hf:{tiny_qwen3(tmp_path / 'm', word_tokenizer())}"
    reused = phasescope.sweep(model, step=4, local=8, samples=2).records
    plain = phasescope.sweep(model, step=4, local=8, samples=2, prefix_reuse=False).records
    assert_same_records(reused, plain)


def test_the_shared_prefix_ends_where_a_window_starts():
    assert common_prefix([[1, 2, 3, 4], [1, 2, 9, 4], [1, 2, 3]]) == 2

    class Item:
        def __init__(self, content_id, ids):
            self.content_id, self.input_ids, self.answer_pos = content_id, ids, len(ids)

    items = [Item(0, list(range(20))), Item(0, list(range(11)) + [99] * 9), Item(1, list(range(30, 50)))] * 1
    assert shared_length(items, step=4, align=1) == 9  # 11 shared, cut back to a window start (≡ 1 mod 4)


def test_an_interrupted_sweep_with_reuse_resumes_to_the_same_records(tmp_path):
    torch.manual_seed(1)
    model = Decoder(preset("tiny", TASK.vocab_size, scheme("tiny-4")))
    whole = phasescope.sweep(model, task=TASK, samples=4, batch_size=2, out=tmp_path / "whole").records
    part = tmp_path / "part"
    phasescope.sweep(model, task=TASK, samples=4, batch_size=2, out=part)
    lines = (part / "records.jsonl").read_text().splitlines(keepends=True)
    (part / "records.jsonl").write_text("".join(lines[:30]) + lines[30][:20])
    again = phasescope.sweep(model, task=TASK, samples=4, batch_size=2, out=part)
    assert again.scored == len(lines) - 30
    assert_same_records(again.records, whole)
