"""Diagnosing a serving stack (issue #42): the crossed design over openai: against oracle stacks
that fail at one prompt-end phase, one needle phase or one distance phase (tests/stack_server.py,
DeepSeek-V4's real tokenizer), the verdict naming the factor, and `compare --paired` locating
where a stack departs from a healthy one on identical items."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import phasescope
from phasescope.analysis.paired import pair_records, paired_statistics
from phasescope.backends.served import Options
from phasescope.cli import app
from phasescope.errors import InputError
from phasescope.rundir.records import Record

SWEEP = dict(step=4, local=8, samples=10, offsets=range(16), pair_format="numbers", design="crossed")


def record(content, offset, correct, answer_pos, anchor_pos=40, digest="d"):
    return Record(
        content_id=content, offset=offset, phase=anchor_pos % 4, step=4, correct=correct, logprob_target=-0.1,
        logprobs={"right": -0.1, "other": -3.0}, align=0, anchor_pos=anchor_pos, answer_pos=answer_pos,
        end_phase=answer_pos % 4, prompt_digest=f"{digest}{content}-{offset}",
    )  # fmt: skip


def grid(correct=lambda c, d, length: True, digest="d"):
    """12 contents x 16 offsets, needle at 40 + d, prompt length 100 + c + d // 4 (every pair of phases)."""
    return [
        record(c, d, correct(c, d, 100 + c + d // 4), 100 + c + d // 4, 40 + d, digest)
        for c in range(12)
        for d in range(16)
    ]


def test_records_without_the_same_prompts_are_not_paired():
    a = grid()
    with pytest.raises(InputError, match=r"content 0 offset 0 variant 0: the two runs' items differ"):
        pair_records(a, grid(digest="other"))
    old = [Record(**{**r.__dict__, "prompt_digest": None}) for r in a]
    with pytest.raises(InputError, match="B's records carry no prompt digest .* rerun that sweep"):
        pair_records(a, old)
    with pytest.raises(InputError, match="share no"):
        pair_records(a, [record(99, 0, True, 100)])


def test_a_gate_error_exits_2_not_1(tmp_path):
    """diff's convention: 1 is "B departs", so anything that stops the comparison exits 2."""
    result = CliRunner().invoke(
        app, ["compare", "--paired", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "c")]
    )
    assert result.exit_code == 2 and "does not exist" in result.output
    bad = CliRunner().invoke(
        app, ["compare", "--paired", "x", "y", "--out", str(tmp_path / "c"), "--max-departures", "many"]
    )
    assert bad.exit_code == 2 and "--max-departures 'many' is invalid" in bad.output


def test_the_departure_is_located_in_one_sentence_and_tested_by_factor():
    a = grid()
    b = grid(lambda c, d, length: length % 4 != 3)
    result = paired_statistics(pair_records(a, b), ("ref", "stack"), n_resamples=300)
    wrong = sum(1 for r in b if not r.correct)
    assert result["b_wrong_a_right"] == wrong and result["b_right_a_wrong"] == 0
    said = f"stack is wrong where ref is right on {wrong} of {wrong} records whose prompt length ≡ 3 mod 4"
    assert result["sentence"].startswith(said + ", and nowhere else")
    assert "(the departures follow the prompt end's phase: p = " in result["sentence"]
    assert "prompts of 100 to 114 tokens" in result["sentence"], "the lengths tested are said"
    test = result["kinds"]["wrong"]["test"]
    assert (test["factor"], test["period"], test["contents_with_departures"]) == (["end"], 4, 12)
    assert sum(c["b_wrong_a_right"] for c in result["cells"] if c["end_phase"] == 3) == wrong
    same = paired_statistics(pair_records(a, a))
    assert same["sentence"] == f"B agrees with A on every one of {len(a)} records (prompts of 100 to 114 tokens)" + (
        "; largest |Δ log-prob| 0 nats"
    )
    assert same["p_value"] == 1.0


def test_classes_tied_at_the_top_rate_are_named_as_a_tie():
    """#59 item 2: the sentence named the lowest of two tied classes ("most where the needle phase 0
    (128 of 300)" with phase 3 at 128 too); now every tied class, in the sentence and paired.json."""
    from phasescope.analysis.departures import most_departing

    classes = [{"value": v, "n": 300, "departures": k} for v, k in enumerate((128, 20, 30, 128))]
    assert [c["value"] for c in most_departing(classes)] == [0, 3]
    a = grid()
    b = grid(lambda c, d, length: length % 4 not in (1, 2))
    result = paired_statistics(pair_records(a, b), ("ref", "stack"), n_resamples=300)
    test = result["kinds"]["wrong"]["test"]
    assert (test["factor"], test["period"], test["most"]) == (["end"], 4, [1, 2])
    assert "whose prompt length ≡ 1 mod 4 or prompt length ≡ 2 mod 4 (tied at the top rate" in result["sentence"]
    assert "and nowhere else" in result["sentence"]


def test_departures_that_follow_no_factor_are_said_to_follow_none_with_their_counts():
    """B broken at random where A is right: no "most where", no "and nowhere else"."""
    a = grid()
    rng = np.random.default_rng(3)
    b = grid(lambda c, d, length: rng.random() > 0.15)
    result = paired_statistics(pair_records(a, b), ("ref", "stack"), n_resamples=300)
    k = result["b_wrong_a_right"]
    assert result["sentence"].startswith(f"stack is wrong where ref is right on {k} of {len(a)} records, following no")
    assert "most where" not in result["sentence"] and "nowhere else" not in result["sentence"]


def test_the_log_prob_is_compared_where_the_answers_cannot_move():
    """Both runs at the floor (every answer wrong): the answers agree, the log-probs do not."""
    floor = lambda c, d, length: False  # noqa: E731
    a = [
        Record(**{**r.__dict__, "logprob_target": -5.0, "logprobs": {"right": -5.0, "other": -0.1}})
        for r in grid(floor)
    ]
    moved = [
        Record(**{**r.__dict__, "logprob_target": -11.0 if r.answer_pos % 4 == 3 else -5.0,
                  "logprobs": {"right": -11.0 if r.answer_pos % 4 == 3 else -5.0, "other": -0.1}})
        for r in grid(floor)
    ]  # fmt: skip
    result = paired_statistics(pair_records(a, moved), ("ref", "stack"), n_resamples=300)
    assert result["b_wrong_a_right"] == result["b_right_a_wrong"] == 0
    assert result["logprob"]["largest_abs"] == pytest.approx(6.0)
    assert result["kinds"]["logprob"]["test"]["factor"] == ["end"]
    assert (
        "log-prob of the right answer differs from ref's by more than 1 nats on 48 of 48 records whose prompt "
        in (result["sentence"])
    )


@pytest.fixture(scope="module")
def tokenizer():
    from phasescope.backends.tokenizers import named_tokenizer

    return named_tokenizer("deepseek-v4")


def swept(tokenizer, fault, out, **kw):
    """A crossed sweep of an oracle stack."""
    from stack_server import StackServer

    options = Options(tokenizer="deepseek-v4", answers=kw.pop("answers", "generation"), backoff=0.01)
    with StackServer(tokenizer, fault=fault) as server:
        return phasescope.sweep(f"openai:{server.url}#stack", "kv-retrieval", options=options, out=out, **SWEEP | kw)


def test_a_length_keyed_stack_is_named_by_the_crossed_design_and_located_by_compare_paired(tokenizer, tmp_path):
    # one-token words: teacher forcing reads at the prompt's length only, as generation does (the
    # three-token numbers under --answers generation: tests/test_stack_server.py)
    words = dict(pair_format="words", answers="teacher-forced")
    healthy = swept(tokenizer, None, tmp_path / "healthy", **words)
    broken = swept(tokenizer, ("length", 4, 3), tmp_path / "stack", **words)
    assert all(r.correct for r in healthy.records)
    assert all(r.correct == (r.answer_pos % 4 != 3) for r in broken.records)
    assert {(r.phase, r.end_phase) for r in broken.records} == {(n, m) for n in range(4) for m in range(4)}
    verdict = phasescope.analyze(tmp_path / "stack").verdict
    assert verdict.kind == "factor" and verdict.claims == ["factor:end"]
    assert verdict.sentence.startswith(
        "where the phase lives: the effect follows the prompt end's phase (prompt length ≡ 3 mod 4: -100.0 pp"
    )
    summary = tmp_path / "step-summary.md"
    args = ["compare", "--paired", str(tmp_path / "healthy"), str(tmp_path / "stack"), "--out", str(tmp_path / "c")]
    result = CliRunner().invoke(app, [*args, "--junit", str(tmp_path / "j.xml"), "--summary-md", str(summary)])
    assert result.exit_code == 1, result.output  # as diff: the stack departs
    wrong = sum(not r.correct for r in broken.records)
    said = f"stack is wrong where healthy is right on {wrong} of {wrong} records whose prompt length ≡ 3 mod 4, and"
    assert said in " ".join(result.output.split())
    paired = json.loads((tmp_path / "c" / "paired.json").read_text())
    assert paired["b_wrong_a_right"] == wrong and paired["names"] == ["healthy", "stack"]
    assert "Record by record" in (tmp_path / "c" / "compare.html").read_text()
    assert 'alt="departures_by_cell.png"' in (tmp_path / "c" / "compare.html").read_text()  # #59 item 1
    from phasescope.reporting.factor_figure import departures_heatmap

    drawn = []  # the heatmap's values: the departures light one column, prompt length ≡ 3 mod 4
    import matplotlib.axes

    original = matplotlib.axes.Axes.imshow

    def imshow(ax, values, **kw):
        drawn.append(values)
        return original(ax, values, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(matplotlib.axes.Axes, "imshow", imshow)
        assert departures_heatmap(paired, tmp_path / "d.png")
    rate = np.nan_to_num(drawn[0])
    column = (3 - paired.get("align", 0)) % 4
    assert rate[:, column].min() > 0 and np.delete(rate, column, axis=1).max() == 0
    gate = json.loads((tmp_path / "c" / "gate.json").read_text())
    assert not gate["passed"] and gate["exit_code"] == 1
    assert {c["name"]: c["passed"] for c in gate["checks"]}["answers"] is False
    finding = next(f for f in gate["findings"] if f["kind"] == "wrong")
    assert (finding["follows"], finding["period"], finding["where"]) == (["end"], 4, "prompt length ≡ 3 mod 4")
    junit = (tmp_path / "j.xml").read_text()
    assert junit == (tmp_path / "c" / "junit.xml").read_text() and '<failure message="' in junit
    assert "phasescope: stack against healthy: **failed**" in summary.read_text()
    # a reproducer per failing cell (needle phase x prompt-end phase), its prompt as sent and what each run answered
    reproducers = sorted((tmp_path / "c" / "reproducers").glob("cell-*[0-9].json"))
    assert len(reproducers) == 4  # the 4 needle phases at prompt length ≡ 3 mod 4
    first = json.loads(reproducers[0].read_text())
    assert first["prompt_length"] % 4 == 3 and first["phases"]["end"] == 3 and first["stack"]["correct"] is False
    assert first["note"].startswith("the runs hold no prompt ids")  # swept without --log-samples
    healthy_again = CliRunner().invoke(
        app,
        [
            "compare",
            "--paired",
            str(tmp_path / "healthy"),
            str(tmp_path / "healthy"),
            "--out",
            str(tmp_path / "d"),
            "--label",
            "a",
            "--label",
            "b",
        ],
    )
    assert healthy_again.exit_code == 0, healthy_again.output
    assert json.loads((tmp_path / "d" / "gate.json").read_text())["passed"] is True


@pytest.mark.parametrize("fault", [("needle", 4, 3), ("distance", 4, 1)])
def test_needle_and_distance_keyed_stacks_are_attributed_to_their_factor(tokenizer, tmp_path, fault):
    run = swept(tokenizer, fault, tmp_path / "run", pair_format="words", answers="teacher-forced")
    assert not all(r.correct for r in run.records)
    claims = phasescope.analyze(tmp_path / "run").verdict.claims
    assert [c for c in claims if c.startswith("factor:")] == [f"factor:{fault[0]}"]


def test_the_crossed_design_runs_on_native_and_hf_models(tmp_path):
    """ids (the demo's tiny-s4) and text (a tiny Qwen3 with Qwen's real tokenizer through hf:):
    every content at every (needle phase, prompt-end phase), records carrying both."""
    from hf_models import tiny_qwen3
    from phasescope.backends.tokenizers import named_tokenizer

    native = phasescope.sweep("src/phasescope/assets/demo/tiny-s4", design="crossed", samples=3, offsets=range(16))
    hf_dir = tiny_qwen3(tmp_path / "qwen", named_tokenizer("qwen3"))
    text = phasescope.sweep(f"hf:{hf_dir}", design="crossed", step=4, samples=2, offsets=range(16), batch_size=8)
    for run in (native, text):
        by_content = {}
        for r in run.records:
            assert r.end_phase == (r.answer_pos - r.align) % 4 and r.prompt_digest
            by_content.setdefault(r.content_id, set()).add((r.phase, r.end_phase))
        assert all(len(seen) == 16 for seen in by_content.values())
    assert np.isfinite([r.logprob_target for r in text.records]).all()


@pytest.mark.parametrize(
    "scenario",
    [
        "10% broken at random, A has a -25 pp needle effect",
        "healthy, nondeterministic: A and B each flip 5%",
    ],
)
def test_departures_without_a_factor_claim_none_beyond_alpha(scenario):
    """The fast subset of the paired calibration table (docs/sweeps.md, 'Paired comparison'): B
    broken at random where A has its own phase effect, and a healthy but nondeterministic pair."""
    from phasescope.analysis.simulate import binomial_bound
    from phasescope.analysis.simulate_factors import FactorScenario
    from phasescope.analysis.simulate_pairs import PairScenario, calibrate_pairs

    reference = FactorScenario(drift_pp=40.0, n_contents=30)
    s = {
        "10% broken at random, A has a -25 pp needle effect": PairScenario(
            reference=FactorScenario(drift_pp=40.0, n_contents=30, needle_pp=25.0), rate=0.1
        ),
        "healthy, nondeterministic: A and B each flip 5%": PairScenario(reference=reference, noise=0.05),
    }[scenario]
    n = 60
    rates = calibrate_pairs(s, n, seed=7, n_permutations=300)
    assert rates["claimed"] <= binomial_bound(0.05, n), rates
    if s.noise:
        assert rates["departs"] <= binomial_bound(0.05, n), "a healthy nondeterministic stack passes"
    else:
        assert rates["departs"] == 1.0, "a stack broken at random departs (and follows no factor)"


def test_a_fault_at_one_prompt_length_residue_is_found_with_its_period():
    from phasescope.analysis.simulate_factors import FactorScenario
    from phasescope.analysis.simulate_pairs import PairScenario, calibrate_pairs

    for where, rate in ((("end", 8, 5), 0.3), (("end", 4, 3), 0.2)):
        s = PairScenario(reference=FactorScenario(drift_pp=40.0, n_contents=30), rate=rate, where=where)
        rates = calibrate_pairs(s, 20, seed=8, n_permutations=300)
        assert rates["found"] >= 0.9 and rates["period"] >= 0.8 and rates["wrong"] <= 0.1, (where, rates)
