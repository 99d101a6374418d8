"""`phasescope check` against oracle serving stacks (tests/stack_server.py, DeepSeek-V4's real
tokenizer), each faulty in one of the ways served DeepSeek-V4 has been (issue #55): keyed on the
prompt length mod 8 (not the step), on a length threshold, on request state (a prompt whose opening
was seen before), and breaking the protocol; a healthy stack passes. The check names the factor, the
period, the length band or the request state, exits as diff does, and saves reproducers that
`phasescope replay` sends again."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from phasescope.check import check, threshold_lengths
from phasescope.cli import app
from phasescope.errors import InputError
from phasescope.gate import Thresholds

# one-token answers (one request per item and one generation), the crossed design over two windows of 8
SWEEP = dict(
    tokenizer="deepseek-v4", step=4, local=8, samples=8, offsets=range(16), design="crossed",
    pair_format="words", answers="generation", backoff=0.01,
)  # fmt: skip
SMALLER = {"samples": 6, "offsets": range(8)}  # where every fault is deterministic and one period is enough


@pytest.fixture(scope="module")
def tokenizer():
    from phasescope.backends.tokenizers import named_tokenizer

    return named_tokenizer("deepseek-v4")


@pytest.fixture
def stacks(tokenizer):
    from stack_server import StackServer

    servers = []

    def start(fault=None, **kw):
        servers.append(StackServer(tokenizer, fault=fault, **kw))
        return f"openai:{servers[-1].url}#stack"

    yield start
    for server in servers:
        server.close()


def checks(decided: dict) -> dict[str, bool]:
    return {c["name"]: c["passed"] for c in decided["checks"]}


def finding(decided: dict, kind: str = "wrong") -> dict:
    return next(f for f in decided["findings"] if f["kind"] == kind)


def test_a_healthy_stack_passes_and_reports_its_largest_log_prob_difference(stacks, tmp_path):
    decided = check(stacks(), tmp_path / "c", stacks(), **SWEEP | SMALLER)
    assert decided["passed"] and decided["exit_code"] == 0, decided["checks"]
    assert all(checks(decided).values()) and set(checks(decided)) >= {
        "answers",
        "log-prob",
        "protocol",
        "request state",
    }
    assert decided["largest_abs_logprob_diff"] == 0.0
    assert "largest |Δ log-prob| 0 nats" in decided["sentence"] and "prompts of " in decided["sentence"]
    assert not (tmp_path / "c" / "compare" / "reproducers").exists()
    assert json.loads((tmp_path / "c" / "check.json").read_text())["passed"] is True


def test_a_period_8_prompt_length_fault_is_named_mod_8_and_its_reproducer_replays(stacks, tmp_path):
    """Prompt length ≡ 5 mod 8: before, named "≡ 1 mod 4" and nothing said period 8."""
    healthy, faulty = stacks(), stacks(("length", 8, 5))
    result = CliRunner().invoke(
        app,
        ["check", "--stack", faulty, "--reference", healthy, "--tokenizer", "deepseek-v4", "--step", "4", "--local",
         "8", "--samples", "8", "--offsets", "0:16", "--no-repeat", "--design", "crossed", "--pair-format", "words",
         "--answers", "generation", "--backoff", "0.01", "--out", str(tmp_path / "c"), "--junit",
         str(tmp_path / "junit.xml")],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    decided = json.loads((tmp_path / "c" / "check.json").read_text())
    wrong = finding(decided)
    assert (wrong["follows"], wrong["period"], wrong["where"]) == (["end"], 8, "prompt length ≡ 5 mod 8")
    assert wrong["there"][0] == wrong["departures"], "every departure is at that residue"
    assert "prompt length ≡ 5 mod 8, and nowhere else" in " ".join(result.output.split())
    assert "<failure" in (tmp_path / "junit.xml").read_text()
    reproducers = sorted((tmp_path / "c" / "compare" / "reproducers").glob("cell-*[0-9].json"))
    assert reproducers
    entry = json.loads(reproducers[0].read_text())
    assert entry["prompt_length"] % 8 == 5 and entry["residues"]["end"]["8"] == 5
    assert entry["request"]["prompt"] == entry["prompt_ids"] and len(entry["prompt_ids"]) == entry["prompt_length"]
    body = json.loads(reproducers[0].with_suffix(".request.json").read_text())
    assert body == entry["request"], "the request body alone, for curl"
    again = CliRunner().invoke(app, ["replay", str(reproducers[0]), "--model", faulty])
    assert again.exit_code == 1 and "NOT the expected answer" in again.output, again.output
    fine = CliRunner().invoke(app, ["replay", str(reproducers[0]), "--model", healthy, "--times", "2"])
    assert fine.exit_code == 0 and fine.output.count("the expected answer") == 2, fine.output


def test_a_fault_past_a_length_threshold_is_found_in_the_band_past_it(stacks, tmp_path):
    """One sweep at two lengths: the stack is wrong only from 700 tokens (an indexer turning sparse)."""
    small = {"context_tokens": (400, 900), "samples": 6, "offsets": range(8)}
    decided = check(stacks(("longer", 700, 0)), tmp_path / "c", stacks(), repeats=False, **SWEEP | small)
    assert not decided["passed"]
    wrong = finding(decided)
    assert wrong["follows"] == ["length"] and wrong["where"] == "length band is 900 tokens", wrong
    assert "on 48 of 48 records whose length band is 900 tokens, and nowhere else" in decided["sentence"]
    assert wrong["there"][0] == wrong["departures"]
    assert "in 2 bands (400 and 900)" in decided["sentence"]
    records = [json.loads(line) for line in (tmp_path / "c" / "stack" / "records.jsonl").read_text().splitlines()]
    assert {r["context_tokens"] for r in records} == {400, 900}
    assert all(r["correct"] == (r["answer_pos"] < 700) for r in records)


def test_a_request_state_fault_is_named_as_such_and_not_blamed_on_a_phase(stacks, tmp_path):
    """The stack answers wrongly when a prompt's opening was sent before with another prompt (a stale
    cross-request cache): sent again in a shuffled order, the first answer of each content changes."""
    decided = check(stacks(("seen", 48, 0)), tmp_path / "c", stacks(), **SWEEP | SMALLER)
    assert not decided["passed"] and checks(decided)["request state"] is False
    state = decided["request_state"]
    assert state["differ"] == SMALLER["samples"], "each content's first prompt was right once, wrong again"
    assert "cache state" in state["sentence"]
    assert decided["runs"]["compared_stack"].endswith("stack-repeat")
    assert all(f["follows"] is None for f in decided["findings"]), decided["findings"]
    repeated = (tmp_path / "c" / "stack-repeat" / "records.jsonl").read_text().splitlines()
    orders = [json.loads(line)["request_order"] for line in repeated]
    assert orders == list(range(len(orders))), "records in the order sent, each with its place"


def test_a_short_generation_is_a_protocol_finding_never_a_wrong_answer(stacks, tmp_path):
    """finish_reason "length" after fewer tokens than asked (three-token numbers cut after one)."""
    options = SWEEP | {"pair_format": "numbers", "samples": 4, "offsets": range(8)}
    decided = check(stacks(protocol="short"), tmp_path / "c", stacks(), repeats=False, **options)
    assert not decided["passed"] and checks(decided)["protocol"] is False
    found = [json.loads(line) for line in (tmp_path / "c" / "stack" / "protocol.jsonl").read_text().splitlines()]
    assert len(found) == 4 * 8 and {f["kind"] for f in found} == {"short"}
    assert "finish_reason 'length'" in found[0]["message"]
    stack_records = (tmp_path / "c" / "stack" / "records.jsonl").read_text().strip()
    assert stack_records == "", "no answer cut for length is scored as wrong"


def test_protocol_faults_stop_a_plain_sweep_naming_the_server_and_keep_the_finding(stacks, tmp_path):
    """A sweep (not a check) stops at the first answer that breaks the protocol (--protocol-faults 0),
    the finding recorded; its ids differ from those sent at position 3."""
    import phasescope
    from phasescope.backends.served import Options

    url = stacks(protocol="ids")
    options = Options(tokenizer="deepseek-v4", backoff=0.01)
    with pytest.raises(InputError, match=r"read token \d+ at position 3 where \d+ was sent.*--protocol-faults 0"):
        phasescope.sweep(url, options=options, out=tmp_path / "r", step=4, local=8, samples=2, offsets=range(8))
    found = (tmp_path / "r" / "protocol.jsonl").read_text().splitlines()
    assert len(found) >= 1 and json.loads(found[0])["kind"] == "ids"


def test_reference_free_checks_a_stack_against_the_known_answers(stacks, tmp_path):
    healthy = check(stacks(), tmp_path / "ok", None, repeats=False, **SWEEP | SMALLER)
    assert healthy["passed"] and healthy["names"] == ["the known answer", "stack"]
    faulty = check(stacks(("length", 4, 3)), tmp_path / "bad", None, repeats=False, **SWEEP | SMALLER)
    assert not faulty["passed"] and finding(faulty)["where"] == "prompt length ≡ 3 mod 4"
    with pytest.raises(InputError, match="reference-free check compares the stack with answers known"):
        check(stacks(), tmp_path / "x", None, **SWEEP | {"probe": "padding-completion"})


def test_the_gate_thresholds_are_checked_and_a_count_or_a_share_is_allowed():
    assert Thresholds("3").allowed(100) == 3 and Thresholds("0.5%").allowed(1000) == 5
    for bad in ("-1", "many", "150%"):
        with pytest.raises(InputError, match="--max-departures"):
            Thresholds(bad)
    with pytest.raises(InputError, match="--alpha"):
        Thresholds(alpha=1.5)


def test_default_lengths_straddle_the_thresholds_a_deepseek_config_declares():
    v4 = {"index_topk": 512, "compress_rates": {"compressed_sparse_attention": 4}}
    assert threshold_lengths(v4) == [1536, 3072]
    v41 = v4 | {"index_candidate_blocks": 2048, "index_block_size": 8}
    assert threshold_lengths(v41) == [1536, 3072, 12288, 24576]
    assert threshold_lengths({"sliding_window": 128}) == []


def test_a_dry_run_prints_both_sweeps_requests_and_tokens(stacks, tmp_path):
    healthy = stacks()
    args = ["check", "--stack", healthy, "--reference", healthy, "--tokenizer", "deepseek-v4", "--step", "4"]
    result = CliRunner().invoke(app, [*args, "--local", "8", "--preset", "canary", "--dry-run", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert text.count("dry run (nothing scored or written)") == 2 and "requests" in text and "prompt_tokens" in text
    assert "records 384" in text, "the canary: 24 contents x 16 offsets"
    assert not (tmp_path / "stack").exists()


def test_a_teacher_forced_fault_is_named_at_the_request_that_carries_it(stacks, tmp_path):
    """Three-token numbers teacher-forced: requests of lengths L, L+1, L+2; a fault at request length
    ≡ 3 mod 4 is named ≡ 3 whichever request carries it (before: "≡ 2" or "≡ 1", the prompt's), and
    its reproducer sends that request (the prompt and the answer's first tokens)."""
    healthy, faulty = stacks(), stacks(("length", 4, 3))
    options = SWEEP | {"pair_format": "numbers", "answers": "teacher-forced", "samples": 6, "offsets": range(8)}
    decided = check(faulty, tmp_path / "c", healthy, repeats=False, **options)
    for kind in ("wrong", "logprob"):
        row = finding(decided, kind)
        assert (row["follows"], row["where"], row["units"]) == (["end"], "prompt length ≡ 3 mod 4", "requests"), row
    found = [json.loads(p.read_text()) for p in (tmp_path / "c" / "compare" / "reproducers").glob("cell-*[0-9].json")]
    assert found and all(entry["request_length"] % 4 == 3 for entry in found)
    later = next(entry for entry in found if entry["answer_tokens_given"] > 0)
    assert len(later["request"]["prompt"]) == later["request_length"] and later["expected_ids"]
    path = tmp_path / "later.json"
    path.write_text(json.dumps(later))
    assert CliRunner().invoke(app, ["replay", str(path), "--model", faulty]).exit_code == 1
    assert CliRunner().invoke(app, ["replay", str(path), "--model", healthy]).exit_code == 0


def test_a_combination_is_named_by_both_its_factors(stacks, tmp_path):
    """Wrong at prompt length ≡ 3 mod 4, but only past 700 tokens: the band and, within it, the residue."""
    fault = lambda length, value_pos, big_l, step: step == 0 and length % 4 == 3 and length >= 700  # noqa: E731
    small = {"context_tokens": (400, 900), "samples": 8, "offsets": range(8)}
    decided = check(stacks(fault), tmp_path / "c", stacks(), repeats=False, **SWEEP | small)
    wrong = finding(decided)
    named = {wrong["where"], wrong["also"]["where"]}
    assert named == {"length band is 900 tokens", "prompt length ≡ 3 mod 4"}, wrong
    assert "; within it, " in decided["sentence"]
