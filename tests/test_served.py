"""openai:URL#MODEL against a local fake vLLM: the same records as hf: on the same weights,
and every fault gives the documented behaviour (retry, then a clear error; ids checked;
finished records kept; the API key never written)."""

import json
import time

import pytest
from transformers import AutoModelForCausalLM

import phasescope
from phasescope.backends.served import Options as ServedOptions
from phasescope.errors import InputError


@pytest.fixture(scope="module")
def served(qwen3_dir):
    from fake_server import FakeVLLM

    directory = qwen3_dir
    server = FakeVLLM(AutoModelForCausalLM.from_pretrained(directory))
    yield server, directory
    server.close()


def options(directory, **kw):
    return ServedOptions(tokenizer=str(directory), backoff=0.01, **kw)


def test_served_records_equal_hf_records_on_the_same_weights(served, tmp_path, monkeypatch):
    server, directory = served
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-123")
    spec = f"openai:{server.url}#tiny"
    remote = phasescope.sweep(spec, step=4, samples=2, out=tmp_path / "r", options=options(directory))
    local = phasescope.sweep(f"hf:{directory}", step=4, samples=2)
    assert len(remote.records) == len(local.records) == 48
    for a, b in zip(remote.records, local.records, strict=True):
        assert a.correct == b.correct and a.answer_ids == b.answer_ids and a.answer_text == b.answer_text
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
    assert all(r.answer_ids and r.answer_text is not None for r in remote.records)
    assert server.auth[-1] == "Bearer sk-secret-123"
    for path in (tmp_path / "r").iterdir():
        if path.is_file():
            assert "sk-secret-123" not in path.read_text(errors="ignore")
    assert phasescope.analyze(tmp_path / "r", n_resamples=100).n_records == 48
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())  # the server as it describes itself
    assert manifest["server"] == {
        "url": server.url,
        "model": "tiny",
        "version": "fake-vllm-1.0",
        "root": "tiny-root",
        "owned_by": None,
        "max_model_len": 512,
    }


def test_5xx_and_dropped_connections_are_retried(served):
    server, directory = served
    server.faults = ["500", "drop", "garbage", "500"]
    result = phasescope.sweep(f"openai:{server.url}#tiny", step=4, samples=1, options=options(directory, concurrency=1))
    assert len(result.records) == 24 and not server.faults


def test_the_last_failure_is_a_clear_error_and_finished_records_stay(served, tmp_path):
    server, directory = served
    spec = f"openai:{server.url}#tiny"
    first = phasescope.sweep(spec, step=4, samples=1, out=tmp_path / "r", batch_size=4, options=options(directory))
    lines = (tmp_path / "r" / "records.jsonl").read_text().splitlines()
    (tmp_path / "r" / "records.jsonl").write_text("\n".join(lines[:8]) + "\n")  # as if it had stopped
    server.faults = ["500"] * 10
    with pytest.raises(InputError, match="no answer after 3 tries"):
        phasescope.sweep(
            spec,
            step=4,
            samples=1,
            out=tmp_path / "r",
            batch_size=4,
            options=options(directory, retries=2, concurrency=1),
        )
    server.faults = []
    kept = (tmp_path / "r" / "records.jsonl").read_text().splitlines()
    assert kept[:8] == lines[:8] and all(json.loads(line) for line in kept)
    again = phasescope.sweep(spec, step=4, samples=1, out=tmp_path / "r", batch_size=4, options=options(directory))
    assert again.scored == len(first.records) - len(kept)


@pytest.mark.parametrize(
    "fault, phrase",
    [
        ("no-logprobs", "no log-probs"),
        ("reorder", "at position 5 where"),
        ("string-logprobs", "malformed .logprobs is a str"),
        ("short-logprobs", "malformed .* log-probs"),
        ("short-tops", "malformed .* top lists"),
        ("tops-not-list", "malformed .*must be lists"),
        ("top-string", "malformed .*top_logprobs entry"),
        ("bad-token", "malformed .*token 'token_id:abc' is not a token id"),
        ("huge-token", "malformed .*is not a token id"),
        ("text-token", "ignores return_tokens_as_token_ids"),
        ("minus-inf", r"log-probability -inf"),
        ("minus-1e308", r"log-probability -1e\+308"),
        ("positive", "log-probability 1.92"),
        ("nan", "log-probability nan"),
        ("string-value", "log-probability '-0.5'"),
    ],
)
@pytest.mark.parametrize("fast", [True, False], ids=["logprob_token_ids", "per-candidate"])
def test_malformed_answers_are_refused_naming_the_server_and_nothing_is_recorded(served, tmp_path, fault, phrase, fast):
    """Each shape a broken or non-vLLM server sends is one error naming the server, the content and
    the offset, on both request paths; the run directory holds no record from it."""
    server, directory = served
    server.faults, server.token_ids_supported = [fault], fast
    try:
        with pytest.raises(InputError, match=phrase) as err:
            phasescope.sweep(
                f"openai:{server.url}#tiny",
                step=4,
                samples=1,
                out=tmp_path / "r",
                options=options(directory, concurrency=1, retries=0),
            )
    finally:
        server.faults, server.token_ids_supported = [], True
    message = str(err.value)
    assert server.url in message and "content " in message and "offset " in message
    records = tmp_path / "r" / "records.jsonl"
    assert not records.exists() or not records.read_text().strip()


def test_a_dripping_server_is_cut_off_at_the_deadline(served):
    """--timeout bounds the whole request: a server sending one byte every 0.3 s is given up on
    after about --timeout seconds, not after every byte."""
    server, directory = served
    server.faults = ["drip"]
    started = time.monotonic()
    with pytest.raises(InputError, match=r"no answer after 1 tries.*within --timeout 1 s.*rerun the same command"):
        phasescope.sweep(
            f"openai:{server.url}#tiny",
            step=4,
            samples=1,
            options=options(directory, concurrency=1, retries=0, timeout=1.0),
        )
    assert time.monotonic() - started < 5
    server.faults = []


def test_429_waits_for_retry_after_within_the_retries(served):
    server, directory = served
    server.faults = ["429", "429"]
    started = time.monotonic()
    result = phasescope.sweep(
        f"openai:{server.url}#tiny", step=4, samples=1, options=options(directory, concurrency=1, retries=2)
    )
    assert len(result.records) == 24 and not server.faults
    assert time.monotonic() - started >= 0.4  # two Retry-After: 0.2 waits honoured
    server.faults = ["429"] * 3
    with pytest.raises(InputError, match=r"no answer after 2 tries .*HTTP 429.*Retry-After 0.2 s.*records are kept"):
        phasescope.sweep(
            f"openai:{server.url}#tiny", step=4, samples=1, options=options(directory, concurrency=1, retries=1)
        )
    server.faults = []


def test_bad_served_specs_are_refused(served):
    server, directory = served
    with pytest.raises(InputError, match="--tokenizer is required"):
        phasescope.sweep(f"openai:{server.url}#tiny", step=4, samples=1)
    with pytest.raises(InputError, match="expected openai:"):
        phasescope.sweep("openai:localhost:8000", step=4, samples=1, options=options(directory))


def test_dry_run_counts_requests_and_tokens_and_writes_nothing(served, tmp_path):
    server, directory = served
    before = server.requests
    result = phasescope.sweep(
        f"openai:{server.url}#tiny", step=4, samples=2, out=tmp_path / "r", options=options(directory), dry_run=True
    )
    plan = result.plan
    assert plan["records"] == plan["requests"] == 48  # one request per item with logprob_token_ids
    assert plan["requests_without_logprob_token_ids"] == 48 * 4  # right + 3 distractors
    assert plan["prompt_tokens"] > 48 * plan["longest_sequence"] // 2
    assert server.requests == before and not (tmp_path / "r").exists()
    assert plan["not_timed"] == "a dry run sends no request to a served model"  # no request spent timing it


def test_one_request_per_item_with_logprob_token_ids_and_a_fallback_without(served):
    server, directory = served
    spec = f"openai:{server.url}#tiny"
    before = server.requests
    fast = phasescope.sweep(spec, step=4, samples=1, options=options(directory)).records
    assert server.requests - before == 24  # one per item
    server.token_ids_supported = False
    try:
        before = server.requests
        slow = phasescope.sweep(spec, step=4, samples=1, options=options(directory)).records
        assert server.requests - before == 1 + 24 * 4  # the first batch (one item) tried it, then per candidate
    finally:
        server.token_ids_supported = True
    for a, b in zip(fast, slow, strict=True):
        assert a.correct == b.correct and a.logprobs == pytest.approx(b.logprobs, abs=1e-5)


def test_multi_token_candidates_are_scored_without_echo_and_equal_hf_records(served):
    """prompts: with multi-token answers: no request echoes the prompt (one request per distinct
    candidate prefix, logprob_token_ids), and every record equals hf:'s on the same weights."""
    server, directory = served
    kw = dict(step=4, samples=4, offsets=range(8))
    probe = "prompts:examples/prompts.jsonl"
    echoed, before = server.echoed, server.requests
    remote = phasescope.sweep(f"openai:{server.url}#tiny", probe, options=options(directory), **kw).records
    local = phasescope.sweep(f"hf:{directory}", probe, **kw).records
    assert server.echoed == echoed
    from transformers import AutoTokenizer

    from phasescope.probes.prompts import PromptsProbe

    tok = AutoTokenizer.from_pretrained(directory)
    items = [
        it
        for g in PromptsProbe(probe[8:], tok, tok.bos_token_id, step=4).stream(list(kw["offsets"]), 4, None)
        for it in g
    ]
    assert any(len(tokens) > 1 for it in items for tokens in it.candidates.values()), "no multi-token candidate"
    prefixes = sum(len({tuple(t[:j]) for t in it.candidates.values() for j in range(len(t))}) for it in items)
    assert (
        server.requests - before
        == prefixes
        == len(remote)
        + sum(len({tuple(t[:j]) for t in it.candidates.values() for j in range(1, len(t))}) for it in items)
    )
    for a, b in zip(remote, local, strict=True):
        assert a.correct == b.correct and a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
    plan = phasescope.sweep(f"openai:{server.url}#tiny", probe, options=options(directory), dry_run=True, **kw).plan
    assert plan["requests"] == prefixes  # the dry run counts what the sweep then sent, not one per sequence


def test_a_server_without_return_token_ids_is_read_through_the_echo(served):
    server, directory = served
    server.prompt_ids_returned = False
    try:
        before, echoed = server.requests, server.echoed
        records = phasescope.sweep(f"openai:{server.url}#tiny", step=4, samples=1, options=options(directory)).records
        assert server.requests - before == 1 + 24 and server.echoed - echoed == 24  # tried once, then echo per item
    finally:
        server.prompt_ids_returned = True
    assert len(records) == 24


@pytest.mark.parametrize("path", ["no-echo", "echo", "per-candidate"])
def test_generation_answers_agree_with_teacher_forcing_on_a_healthy_server(served, path):
    """--answers generation: one greedy request more per item decides `correct`, on every request
    path; on a server whose greedy decoding is its teacher-forced argmax the records are the same
    but for answer_from, and request_lengths gains the prompt's length."""
    server, directory = served
    server.prompt_ids_returned = path != "echo"
    server.token_ids_supported = path != "per-candidate"
    try:
        spec = f"openai:{server.url}#tiny"
        forced = phasescope.sweep(spec, step=4, samples=1, options=options(directory)).records
        before = server.requests
        generated = phasescope.sweep(spec, step=4, samples=1, options=options(directory, answers="generation")).records
        sent = server.requests - before
    finally:
        server.prompt_ids_returned = server.token_ids_supported = True
    assert sent == {"no-echo": 24 + 24, "echo": 1 + 24 + 24, "per-candidate": 1 + 24 * 4 + 24}[path]
    for a, b in zip(forced, generated, strict=True):
        assert (a.answer_from, b.answer_from) == ("teacher-forced", "generation")
        assert a.correct == b.correct and a.logprobs == pytest.approx(b.logprobs, abs=1e-6)
        assert a.answer_ids == b.answer_ids and len(a.answer_ids) == 1  # every path reads the model's answer
        length = a.answer_pos
        assert a.request_lengths == ([length + 1] if path == "per-candidate" else [length])
        assert b.request_lengths == ([length, length + 1] if path == "per-candidate" else [length])


def refused_once(served, fault: str, url: str, out, model: str = "tiny") -> InputError:
    """The InputError a one-sample sweep of ``url`` raises while the server answers ``fault``."""
    server, directory = served
    server.faults = [fault]
    try:
        with pytest.raises(InputError) as err:
            sweep_options = options(directory, concurrency=1)
            phasescope.sweep(f"openai:{url}#{model}", step=4, samples=1, out=out, options=sweep_options)
    finally:
        server.faults = []
    return err.value


def test_a_redirect_names_where_the_server_points_and_what_to_pass(served, tmp_path):
    """A 307 used to read "unreadable JSON: ''" three times over (#44 part 6)."""
    message = str(refused_once(served, "307", served[0].url, tmp_path / "r"))
    assert "HTTP 307, a redirect to http://127.0.0.1:9/v2/completions" in message
    assert "pass the address it points to, openai:http://127.0.0.1:9/v2#tiny" in message and "unreadable" not in message


def test_a_server_that_stops_answering_logprob_token_ids_mid_run_keeps_the_records_and_says_why(
    served, tmp_path, monkeypatch
):
    server, directory = served
    answer, seen = server.answer, []

    def changes_mid_run(body, fault):
        seen.append(1)
        if len(seen) > 8:  # the first batches were scored through logprob_token_ids
            server.token_ids_supported = False
        return answer(body, fault)

    monkeypatch.setattr(server, "answer", changes_mid_run)
    try:
        with pytest.raises(InputError) as err:
            phasescope.sweep(f"openai:{server.url}#tiny", step=4, samples=2, out=tmp_path / "r", batch_size=4,
                             options=options(directory, concurrency=1))  # fmt: skip
    finally:
        server.token_ids_supported = True
    message = str(err.value)
    assert "stopped answering logprob_token_ids, which it answered earlier in this run" in message
    assert "Scored records are kept; rerun the same command to resume" in message
    assert (tmp_path / "r" / "records.jsonl").read_text().strip()


@pytest.mark.parametrize(
    ("fault", "phrase", "kind"),
    [
        ("not-top", "greedy decoding and its own log-probs disagree", "inconsistent"),
        ("all-certain", "tokens at probability 1 in one position", "logprobs"),
        ("duplicate", "appears twice in one object", "duplicate"),
        ("reorder", "at position 5 where", "ids"),
    ],
)
def test_an_answer_that_breaks_the_protocol_is_a_finding_never_a_score(served, tmp_path, fault, phrase, kind):
    """Issue #57 item 2: checked before anything is recorded, named with the server, the content and the
    offset, recorded in protocol.jsonl; a sweep stops at the first (--protocol-faults 0), a check records all."""
    server, directory = served
    server.faults = [fault] * 500
    try:
        with pytest.raises(InputError, match=phrase) as err:
            phasescope.sweep(
                f"openai:{server.url}#tiny", step=4, samples=1, offsets=range(8), out=tmp_path / "r",
                options=options(directory, concurrency=1, retries=0),
            )  # fmt: skip
        message = str(err.value)
        assert server.url in message and "content 0, offset " in message and "--protocol-faults 0" in message
        found = [json.loads(line) for line in (tmp_path / "r" / "protocol.jsonl").read_text().splitlines()]
        assert found and {f["kind"] for f in found} == {kind}
        records = tmp_path / "r" / "records.jsonl"
        assert not records.exists() or not records.read_text().strip()
        everything = phasescope.sweep(
            f"openai:{server.url}#tiny", step=4, samples=1, offsets=range(8), out=tmp_path / "all",
            options=options(directory, concurrency=1, retries=0, protocol_faults=100),
        )  # fmt: skip
        assert everything.records == [] and len((tmp_path / "all" / "protocol.jsonl").read_text().splitlines()) == 8
    finally:
        server.faults = []


def test_the_answer_with_index_0_is_read_whatever_the_order_of_the_choices(served, tmp_path):
    server, directory = served
    common = dict(step=4, samples=1, offsets=range(8), options=options(directory, concurrency=1))
    healthy = phasescope.sweep(f"openai:{server.url}#tiny", **common).records
    server.faults = ["choices-reversed"] * 500
    try:
        reversed_ = phasescope.sweep(f"openai:{server.url}#tiny", **common).records
    finally:
        server.faults = []
    assert [r.logprobs for r in reversed_] == [r.logprobs for r in healthy]


def test_a_long_rate_limit_wait_is_said_not_silent(served, monkeypatch, capsys):
    """Issue #57: one HTTP 429 with Retry-After 150 under --no-progress was 150 s without a word."""
    from phasescope.backends.transport import Transport

    server, _ = served
    slept = []
    monkeypatch.setattr("phasescope.backends.transport.time.sleep", slept.append)
    server.faults = ["429-long"]
    transport = Transport(server.url, timeout=10, retries=2, backoff=0.01, model="tiny")
    answer = transport.post(
        "completions", {"model": "tiny", "prompt": [1, 2, 3, 4, 5, 6], "max_tokens": 1}, "content 0"
    )
    assert answer["choices"] and slept == [150.0]
    said = capsys.readouterr().err
    assert "HTTP 429 (rate limited), Retry-After 150 s; waiting 150 s before trying again (content 0)" in said


def test_an_address_without_v1_gets_the_fix_and_a_failed_first_try_leaves_nothing_in_the_way(served, tmp_path):
    """A URL without /v1 failed with "HTTP 404 ... rerun the same command" and no hint, and after the fix
    the run directory the failed try had made, holding no record, was refused as swept with another model."""
    server, directory = served
    bare = server.url.removesuffix("/v1")
    message = str(refused_once(served, "404", bare, tmp_path / "r"))
    assert "HTTP 404" in message and f"try --model openai:{bare}/v1#tiny" in message
    assert not (tmp_path / "r" / "records.jsonl").exists() or not (tmp_path / "r" / "records.jsonl").read_text()
    fixed = phasescope.sweep(f"openai:{server.url}#tiny", step=4, samples=1, out=tmp_path / "r",
                             options=options(directory, concurrency=1))  # fmt: skip
    assert len(fixed.records) == 24
    with pytest.raises(InputError, match="no API there .*HTTP 404.* try --model"):  # said before anything is built
        phasescope.sweep(f"openai:{bare}#tiny", step=4, samples=1, out=tmp_path / "r",
                         options=options(directory, concurrency=1))  # fmt: skip
    other = server.url.replace("127.0.0.1", "localhost")  # the same server by another name
    with pytest.raises(InputError, match="address changed"):  # once scored, another address is refused
        phasescope.sweep(f"openai:{other}#tiny", step=4, samples=1, out=tmp_path / "r",
                         options=options(directory, concurrency=1))  # fmt: skip


def test_a_refused_connection_before_any_answer_fails_at_once_naming_the_fix(served, tmp_path):
    """A refused connection gave 80 s of retries behind a frozen bar: before the server has answered
    once, nothing is listening, and retrying will not change that."""
    import socket

    server, directory = served
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    start = time.monotonic()
    with pytest.raises(InputError, match=r"nothing answers there .*is the server running"):
        options = ServedOptions(tokenizer=str(directory), retries=5, backoff=5.0, concurrency=1)
        url = f"openai:http://127.0.0.1:{port}/v1#tiny"
        phasescope.sweep(url, step=4, samples=1, out=tmp_path / "r", options=options)
    assert time.monotonic() - start < 20


def test_a_model_name_the_server_does_not_serve_gets_the_names_it_does(served, tmp_path):
    """#59 item 9: a wrong model name under /v1 read "HTTP 404 ... does not exist" with no way on;
    the server's GET /v1/models names what it serves, and the error passes that on."""
    server = served[0]
    start = time.monotonic()
    message = str(refused_once(served, "unknown-model", server.url, tmp_path / "r", model="tinyy"))
    assert f"does not serve 'tinyy'; it serves tiny: try --model openai:{server.url}#tiny" in message
    assert time.monotonic() - start < 5 and not (tmp_path / "r").exists()  # the pre-flight: nothing built
    from phasescope.backends.transport import Transport

    server.faults = ["unknown-model"]  # a 404 from the scoring request itself names them too
    try:
        with pytest.raises(InputError) as err:
            Transport(server.url, timeout=10, retries=0, backoff=0, model="tinyy").post(
                "completions", {"model": "tinyy", "prompt": [1, 2], "max_tokens": 1}, "content 0"
            )
    finally:
        server.faults = []
    assert "The model `tinyy` does not exist" in str(err.value)
    assert f"The server serves tiny: try --model openai:{server.url}#tiny" in str(err.value)
