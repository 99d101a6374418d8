"""Each record keeps what the model answered (#46 item 4): ``answer_ids`` are the tokens greedy
decoding gives after the prompt, read along the target up to the first that differs, and
``answer_text`` their text. Checked against transformers' own greedy ``generate`` on the same
prompts, on the plain path and the prefix-sharing path, with multi-token answers on Qwen3's real
tokenizer; and the answer agrees with ``correct``."""

import json

import pytest
import torch
from transformers import AutoModelForCausalLM

import phasescope
from phasescope.backends.base import greedy_along


def test_greedy_along_stops_at_the_first_token_off_the_target():
    assert greedy_along([5, 6, 7], [5, 6, 7]) == [5, 6, 7]
    assert greedy_along([5, 9, 7], [5, 6, 7]) == [5, 9]  # after 9 the teacher-forced path is not greedy's
    assert greedy_along([1, 6, 7], [5, 6, 7]) == [1]


@pytest.fixture(scope="module")
def numbers_model(tmp_path_factory, qwen3_tokenizer):
    """A tiny Qwen3 on Qwen's real tokenizer: six-digit values are several tokens each."""
    from hf_models import tiny_qwen3

    return tiny_qwen3(tmp_path_factory.mktemp("answers") / "m", qwen3_tokenizer, vocab_size=151_669)


@pytest.mark.parametrize("prefix_reuse", [True, False], ids=["prefix-shared", "plain"])
def test_the_recorded_answer_is_what_greedy_generation_gives(numbers_model, qwen3_tokenizer, tmp_path, prefix_reuse):
    run = tmp_path / "run"
    common = dict(step=4, samples=1, offsets=range(8), pair_format="numbers", log_samples=True, out=run)
    result = phasescope.sweep(f"hf:{numbers_model}", prefix_reuse=prefix_reuse, **common)
    model = AutoModelForCausalLM.from_pretrained(numbers_model).eval()
    samples = {(s["content_id"], s["offset"]): s for s in map(json.loads, (run / "samples.jsonl").open())}
    assert len(result.records) == len(samples) == 8
    for record in result.records:
        sample = samples[(record.content_id, record.offset)]
        target = sample["candidates"][sample["target"]]
        assert len(target) > 1, "numbers are several tokens on Qwen's tokenizer"
        with torch.no_grad():
            prompt = torch.tensor([sample["prompt_ids"]])
            generated = model.generate(prompt, max_new_tokens=len(record.answer_ids), do_sample=False)
        assert record.answer_ids == generated[0, prompt.shape[1] :].tolist()
        assert record.correct == (record.answer_ids == target)
        assert record.answer_text == qwen3_tokenizer.decode(record.answer_ids)
        assert record.target_text == qwen3_tokenizer.decode(target) == sample["candidate_texts"][sample["target"]]
        assert (sample["answer_ids"], sample["answer_text"]) == (record.answer_ids, record.answer_text)


def test_the_report_lists_wrong_answers_at_the_lowest_phase_and_old_runs_have_no_such_section(tmp_path):
    import re
    import shutil
    from pathlib import Path

    run = tmp_path / "run"
    result = phasescope.sweep("demo:tiny-s4", step=4, samples=8, offsets=range(8), out=run, log_samples=True)
    page = phasescope.report(run).read_text()
    section = page[page.index("<h2>What the model answered</h2>") :].split("<h2>", 2)[1]
    cell = r"<td>([^<]*)</td>"
    rows = re.findall(r"<tr><td>(\d+)</td><td>(\d+)</td>" + cell + r"<td>ids ([\d ]+)</td><td>ids ([\d ]+)</td>" + cell,
                      section)  # fmt: skip
    assert rows, section
    records = {(r.content_id, r.offset): r for r in result.records}
    for content, offset, prompt, right, answer, chosen in rows:
        record = records[(int(content), int(offset))]
        assert not record.correct and record.answer_ids == [int(t) for t in answer.split()] and right != answer
        end = (record.answer_pos - (record.align or 0)) % 4
        phases = f"needle {record.phase}, end {end}, distance {(end - record.phase) % 4}"
        assert prompt == f"{record.answer_pos:,} tokens; {phases}"
        assert chosen.startswith("ids ") and "pair@" not in chosen  # the candidate as its ids, not its name
    old = sorted((Path(__file__).parent / "data" / "old_runs").iterdir())[0]
    shutil.copytree(old, tmp_path / "old")
    from phasescope.reporting.answers import answers_section

    assert answers_section(tmp_path / "old", phasescope.analyze(tmp_path / "old", n_resamples=100)) == ""
