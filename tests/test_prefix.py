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


def test_long_prompts_with_reuse_reach_the_disk_a_few_contents_at_a_time(tmp_path, monkeypatch):
    """With reuse every content of a chunk was one batch: a 1K-token sweep of 12 contents wrote
    all 288 records at its end (#46 part 2). Batches now hold REUSE_TOKENS of prompt (here one
    content), and the records equal the plain sweep's."""
    import phasescope.backends.logits
    from phasescope.rundir import RunDir

    monkeypatch.setattr(phasescope.backends.logits, "REUSE_TOKENS", 100)  # fewer than one prompt: one content
    writes = []
    append = RunDir.append
    monkeypatch.setattr(RunDir, "append", lambda self, lines: (writes.append(lines.count("\n")), append(self, lines)))
    torch.manual_seed(0)
    model = Decoder(preset("tiny", TASK.vocab_size, scheme("tiny-4", local=8)))
    kwargs = dict(task=TASK, samples=4, offsets=range(8), local=8)
    reused = phasescope.sweep(model, out=tmp_path / "run", **kwargs).records
    assert writes == [8, 8, 8, 8]  # one content's offsets per write
    assert_same_records(reused, phasescope.sweep(model, prefix_reuse=False, **kwargs).records)


def test_an_interrupt_says_how_many_records_are_on_disk(tmp_path, monkeypatch):
    """Ctrl-C said 'finished work is on disk' when none was; it counts the records kept."""
    from phasescope.backends.logits import LogitsBackend

    score, calls = LogitsBackend.score, []

    def interrupted_on_the_third_batch(self, items):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return score(self, items)

    monkeypatch.setattr(LogitsBackend, "score", interrupted_on_the_third_batch)
    torch.manual_seed(0)
    model = Decoder(preset("tiny", TASK.vocab_size, scheme("tiny-4", local=8)))
    run = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt) as stop:
        phasescope.sweep(model, task=TASK, samples=6, offsets=range(8), local=8, batch_size=2, out=run)
    kept = len((run / "records.jsonl").read_text().splitlines())
    assert kept > 0 and str(stop.value) == (
        f"{kept} of 48 records are on disk in {run} ({48 - kept} to score); rerun the same command to continue"
    )


def test_a_ctrl_c_during_a_batch_stops_after_it_and_is_never_swallowed(tmp_path, monkeypatch):
    """Issue #57: a KeyboardInterrupt raised inside an object's __del__ is ignored by Python and the sweep
    ran on; SIGINT now sets a flag the loop reads after each batch, so the batch in flight is kept."""
    import os
    import signal

    from phasescope.backends.logits import LogitsBackend

    score, calls = LogitsBackend.score, []

    def signalled_in_the_second_batch(self, items):
        calls.append(len(items))
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)  # as a terminal's Ctrl-C: the handler only sets the flag
        return score(self, items)

    monkeypatch.setattr(LogitsBackend, "score", signalled_in_the_second_batch)
    model = Decoder(preset("tiny", TASK.vocab_size, scheme("tiny-4", local=8)))
    run = tmp_path / "run"
    before = signal.getsignal(signal.SIGINT)  # the default, or SIG_IGN where the suite runs as a background job
    with pytest.raises(KeyboardInterrupt) as stop:
        phasescope.sweep(model, task=TASK, samples=6, offsets=range(8), local=8, batch_size=2, out=run)
    kept = len((run / "records.jsonl").read_text().splitlines())
    assert len(calls) == 2 and kept == sum(calls), "the batch in flight was written, then the sweep stopped"
    assert str(stop.value).startswith(f"{kept} of 48 records are on disk")
    assert signal.getsignal(signal.SIGINT) is before, "the handler is restored"


def test_a_ctrl_c_before_any_record_says_nothing_was_written(tmp_path, monkeypatch):
    from phasescope.run import orchestrator

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(orchestrator.SweepChecks, "add", interrupted)
    with pytest.raises(KeyboardInterrupt, match="nothing was written yet"):
        phasescope.sweep("src/phasescope/assets/demo/tiny-s4", samples=2, offsets=range(8), out=tmp_path / "r")
    assert not (tmp_path / "r").exists()
