"""openai: against an oracle serving stack (tests/stack_server.py) on DeepSeek-V4's real tokenizer:
healthy, every record is right; with a bug keyed to the prompt's length (wrong whenever it is 3
mod 4, as DeepSeek-V4 on vLLM), teacher forcing meets it at several lengths per item (recorded in
``request_lengths``) while ``--answers generation`` meets it at the prompt's length only, as the
deployed stack does; the option is checked and is part of the run's identity."""

import json

import pytest
from typer.testing import CliRunner

import phasescope
from phasescope.backends import backend_options
from phasescope.backends.served import Options
from phasescope.cli import app
from phasescope.errors import InputError

# numbers pairs: DeepSeek-V4 encodes " 482913" as " ", "482", "913", so every answer is 3 tokens
# and teacher forcing asks at L, L+1 and L+2; pad-prefix moves the prompt's end with the offset,
# so every content is seen at every prompt length mod 4
SWEEP = dict(step=4, local=8, samples=3, offsets=range(8), pair_format="numbers", design="pad-prefix")


@pytest.fixture(scope="module")
def tokenizer():
    from phasescope.backends.tokenizers import named_tokenizer

    return named_tokenizer("deepseek-v4")


@pytest.fixture
def stack(tokenizer):
    from stack_server import StackServer

    servers = []

    def start(fault=None, **kw):
        servers.append(StackServer(tokenizer, fault=fault, **kw))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def sweep(server, answers="teacher-forced", **kw):
    options = Options(tokenizer="deepseek-v4", answers=answers, backoff=0.01)
    return phasescope.sweep(f"openai:{server.url}#stack", "kv-retrieval", options=options, **(SWEEP | kw))


def test_a_healthy_stack_answers_every_record_right(stack):
    server = stack()
    records = sweep(server).records
    assert len(records) == 24 and all(r.correct for r in records)
    for r in records:
        assert r.answer_from == "teacher-forced"
        assert r.request_lengths == [r.answer_pos, r.answer_pos + 1, r.answer_pos + 2]
        assert max(r.logprobs, key=r.logprobs.get) == r.target == "right"
    assert sorted({r.answer_pos % 4 for r in records}) == [0, 1, 2, 3]
    # the oracle read each prompt as the probe built it
    seen = {(e["L"], e["value_pos"]) for e in server.log}
    assert {(r.answer_pos, r.value_pos) for r in records} == seen


def test_a_length_keyed_bug_meets_teacher_forcing_at_every_length_it_sends(stack):
    server = stack(("length", 4, 3))
    records = sweep(server).records
    for r in records:
        assert r.answer_from == "teacher-forced"
        assert r.request_lengths == [r.answer_pos, r.answer_pos + 1, r.answer_pos + 2]
        # wrong when any of L, L+1, L+2 is 3 mod 4: right only at L = 0 mod 4
        assert r.correct == (not any(n % 4 == 3 for n in r.request_lengths)) == (r.answer_pos % 4 == 0)
    assert sum(r.correct for r in records) == 6  # 3 contents x the 2 offsets at L = 0 mod 4
    assert {n % 4 for n in server.lengths} == {0, 1, 2, 3}


def test_generation_meets_a_length_keyed_bug_at_the_prompts_length_only(stack, tmp_path):
    """Through the command line: --answers generation; a record is wrong exactly when its
    prompt's length is 3 mod 4; the log-probs are the teacher-forced ones; one request more per
    item, and the dry run counts it."""
    server = stack(("length", 4, 3))
    forced = {(r.content_id, r.offset): r for r in sweep(server).records}
    before, logged = server.requests, len(server.log)
    args = ["sweep", "--model", f"openai:{server.url}#stack", "--tokenizer", "deepseek-v4", "--answers", "generation"]
    args += ["--probe", "kv-retrieval", "--pair-format", "numbers", "--design", "pad-prefix", "--step", "4"]
    args += ["--local", "8", "--samples", "3", "--offsets", "0:8", "--out", str(tmp_path / "r"), "--no-progress"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (tmp_path / "r" / "records.jsonl").read_text().splitlines()]
    assert len(records) == 24
    for r in records:
        assert r["answer_from"] == "generation"
        assert r["request_lengths"] == [r["answer_pos"], r["answer_pos"] + 1, r["answer_pos"] + 2]
        assert r["correct"] == (r["answer_pos"] % 4 != 3)
        assert r["logprobs"] == pytest.approx(forced[(r["content_id"], r["offset"])].logprobs)
    assert sum(not r["correct"] for r in records) == 6
    generations = [e for e in server.log[logged:] if e["max_tokens"] == 3]  # the greedy requests
    assert len(generations) == 24 and all(e["length"] == e["L"] for e in generations)
    sent = server.requests - before
    assert sent == 24 * 6 + 24  # 6 distinct candidate prefixes per item (all start with " "), + 1 generation
    plan = sweep(server, answers="generation", dry_run=True).plan
    assert plan["requests"] == sent and plan["requests_without_logprob_token_ids"] == 24 * 4 + 24
    assert sweep(server, dry_run=True).plan["requests"] == 24 * 6


@pytest.mark.parametrize("fault", [("needle", 4, 1), ("distance", 4, 2)])
def test_needle_and_distance_keyed_bugs_are_wrong_at_their_positions(stack, fault):
    server = stack(fault)
    records = sweep(server, answers="generation", design="shift-needle").records
    kind, step, residue = fault
    for r in records:
        position = r.value_pos if kind == "needle" else r.answer_pos - r.value_pos
        assert r.correct == (position % step != residue)
    assert 0 < sum(r.correct for r in records) < len(records)


def test_a_generation_that_stops_early_is_wrong_not_an_error(stack):
    server = stack(stop_early=True)  # one token, then EOS: shorter than every 3-token answer
    records = sweep(server, answers="generation", samples=1).records
    assert records and not any(r.correct for r in records)
    assert all(r.answer_from == "generation" for r in records)


def test_answers_must_be_teacher_forced_or_generation(tmp_path):
    with pytest.raises(InputError, match=r"--answers 'bogus' is invalid; allowed: teacher-forced \| generation"):
        backend_options("openai", {"answers": "bogus"})
    args = ["sweep", "--model", "openai:http://127.0.0.1:9/v1#m", "--tokenizer", "deepseek-v4", "--answers", "bogus"]
    args += ["--out", str(tmp_path / "r")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code != 0 and "--answers 'bogus' is invalid" in result.output
    assert "--answers" in CliRunner().invoke(app, ["sweep", "--help-all"], env={"COLUMNS": "200"}).output


def test_a_run_is_not_resumed_with_other_answers(stack, tmp_path):
    """--answers changes `correct`, so it is part of the run's identity (spec.json)."""
    server = stack()
    sweep(server, samples=1, out=tmp_path / "r")
    spec = json.loads((tmp_path / "r" / "spec.json").read_text())
    assert spec["sweep"]["backend"]["answers"] == "teacher-forced"
    with pytest.raises(InputError, match=r'sweep.backend.answers: "teacher-forced" in the run, "generation" now'):
        sweep(server, answers="generation", samples=1, out=tmp_path / "r")


def test_decoded_answers_that_their_log_probs_contradict_are_read_not_refused(stack, tmp_path):
    """docs/serving.md's worked example in small: under the crossed design a length-keyed bug gives
    some records a right decoded answer beside teacher-forced log-probs that favour another
    candidate (the fault itself); analyze reads them instead of calling the record edited."""
    server = stack(("length", 4, 3))
    out = tmp_path / "r"
    records = sweep(server, answers="generation", design="crossed", samples=6, offsets=range(8), out=out).records
    # right as decoded, yet teacher forcing gives the target under 1/2 (a later answer token's request meets the bug)
    contradicted = [r for r in records if r.correct and r.logprob_target < -1.0]
    assert contradicted  # the case the reader must accept
    m = phasescope.analyze(out, n_resamples=100)
    assert m.overall_accuracy == pytest.approx(sum(r.correct for r in records) / len(records))


def test_a_run_whose_server_moved_says_the_address_changed_and_adopt_records_resumes_it(stack, tmp_path):
    """Issue #57: a served run resumed after its server moved to another port read "swept with another
    model (weights fingerprint ...)", deleting the run the only way offered."""
    first = stack()
    sweep(first, samples=2, out=tmp_path / "r")
    records = (tmp_path / "r" / "records.jsonl").read_text()
    (tmp_path / "r" / "records.jsonl").write_text("".join(records.splitlines(keepends=True)[:5]))
    moved = stack()
    with pytest.raises(InputError, match=r"the server's address changed .* --adopt-records"):
        sweep(moved, samples=2, out=tmp_path / "r")
    again = sweep(moved, samples=2, out=tmp_path / "r", adopt_records=True)
    assert again.scored == len(again.records) - 5
    assert json.loads((tmp_path / "r" / "manifest.json").read_text())["model_fingerprint"].startswith(
        f"served:{moved.url}"
    )


def test_a_server_that_refuses_the_echo_it_was_moved_to_is_told_why(stack, tmp_path):
    """Issue #57: the first answer lacked prompt_token_ids, the client silently asked for the echo, and the
    server's HTTP 400 was relayed without the missing field ever being named."""
    server = stack(return_ids=False)
    with pytest.raises(InputError, match=r"refused the request .* because its first answer had no prompt_token_ids"):
        sweep(server, samples=1, offsets=range(8), out=tmp_path / "r")
