"""Where the phase lives (issue #42): the designs that move the needle and the prompt end apart
(probes, ids and text on the real tokenizers), the statistics by factor (planted effects found
and attributed, nulls at alpha under drift), and the verdict's words."""

from __future__ import annotations

import numpy as np
import pytest

from phasescope.analysis.factors import factor_phases, layout
from phasescope.analysis.simulate import binomial_bound
from phasescope.analysis.simulate_factors import FactorScenario, calibrate_factors, factor_claims, simulate_factors
from phasescope.analysis.stats import analyze_arrays
from phasescope.analysis.verdict import ALPHA
from phasescope.backends.tokenizers import named_tokenizer
from phasescope.data.retrieval import RetrievalTask
from phasescope.designs import DESIGN_MOVES, end_shifts
from phasescope.probes.kv_retrieval import KVRetrievalProbe, KVRetrievalSpec
from phasescope.probes.kv_retrieval_text import TextKVRetrievalProbe, TextKVSpec

OFFSETS = list(range(24))


def cells(items, step=4):
    """content -> the (needle phase, prompt-end phase) pairs it is seen at."""
    out = {}
    for it in items:
        out.setdefault(it.content_id, set()).add((it.anchor_pos % step, it.answer_pos % step))
    return out


def test_end_shifts_cover_every_end_residue_at_every_needle_phase_and_only_crossed_draws():
    rng = np.random.default_rng(0)
    shifts = end_shifts("crossed", OFFSETS, 4, rng)
    lead = min(shifts.values())
    assert 0 <= lead < 8 and max(shifts.values()) <= 2 * 8 - 2, "the longest period tested at step 4 is 8"
    for phase in range(4):
        assert {(shifts[d] - lead) % 4 for d in OFFSETS if d % 4 == phase} == {0, 1, 2, 3}
    # the prompt end moves over the residues mod 8 too, not only over s consecutive lengths
    assert len({shifts[d] % 8 for d in OFFSETS}) >= 6
    state = np.random.default_rng(1).bit_generator.state
    quiet = np.random.default_rng(1)
    for design in ("shift-needle", "pad-prefix", "shift-end"):
        end_shifts(design, OFFSETS, 4, quiet)
    assert quiet.bit_generator.state == state, "the other designs' contents must not change"
    assert end_shifts("shift-end", OFFSETS, 4, rng) == {d: d for d in OFFSETS}


@pytest.mark.parametrize("design", ["shift-needle", "pad-prefix", "shift-end", "crossed"])
def test_native_kv_retrieval_moves_what_its_design_says(design):
    probe = KVRetrievalProbe(RetrievalTask(), KVRetrievalSpec(design=design), min_gap=12, step=4)
    items = probe.items(OFFSETS, 3, np.random.default_rng(0))
    first = {it.content_id: it for it in items if it.offset == 0}
    for it in items:
        base = first[it.content_id]
        needle, end = it.anchor_pos - base.anchor_pos, it.answer_pos - base.answer_pos
        assert it.answer_pos == len(it.input_ids)
        assert it.input_ids[it.value_pos : it.value_last + 1] == it.candidates["right"]
        assert it.answer_pos - 1 - it.value_last >= 12
        moves = DESIGN_MOVES[design]
        assert (needle == it.offset) == ("needle" in moves) or it.offset == 0
        if design == "shift-end":
            assert (needle, end) == (0, it.offset)
        if design == "shift-needle":
            assert end == 0
    if design == "crossed":
        assert all(len(seen) == 16 for seen in cells(items).values()), "every content at all s x s cells"


@pytest.mark.parametrize("name", ["deepseek-v4", "qwen3"])
@pytest.mark.parametrize("design", ["shift-end", "crossed"])
def test_text_kv_retrieval_moves_the_prompt_end_token_exactly_on_the_real_tokenizers(name, design):
    tok = named_tokenizer(name)
    spec = TextKVSpec(design=design, pair_format="numbers")
    probe = TextKVRetrievalProbe(tok, spec, bos_id=tok.bos_token_id, min_gap=136, step=4)
    items = probe.items(OFFSETS, 3, np.random.default_rng(0))
    first = {it.content_id: it for it in items if it.offset == 0}
    bos = 1 if tok.bos_token_id is not None else 0
    for it in items:
        body = it.input_ids[bos:]
        assert tok.encode(tok.decode(body), add_special_tokens=False) == body, "the prompt re-tokenizes"
        assert it.input_ids[it.value_pos : it.value_last + 1] == it.candidates["right"]
        assert it.answer_pos - 1 - it.value_last >= 136
        base = first[it.content_id]
        assert it.answer_pos - it.padding["end_tokens"] == base.answer_pos - base.padding["end_tokens"]
        assert it.anchor_pos - base.anchor_pos == (it.offset if design == "crossed" else 0)
        if design == "shift-end":
            assert it.anchor_pos == first[it.content_id].anchor_pos and it.padding["end_tokens"] == it.offset
    if design == "crossed":
        assert all(len(seen) == 16 for seen in cells(items).values())


def test_the_layout_names_what_each_design_moves_ties_and_holds():
    def shape(design, start):
        r = simulate_factors(FactorScenario(design=design, end_start=start, n_contents=20), np.random.default_rng(0))
        return layout(r, factor_phases(r))

    assert shape("crossed", "one")["groups"] == [["needle"], ["end"], ["distance"]]
    assert shape("shift-needle", "one") == {"groups": [["needle", "distance"]], "held": {"end": 100 % 4}}
    assert shape("pad-prefix", "one")["groups"] == [["needle", "end"]]
    assert shape("shift-end", "one")["groups"] == [["end", "distance"]]
    # each content ends at its own phase: the held end differs between contents, which separates needle and distance
    assert shape("shift-needle", "uniform") == {"groups": [["needle"], ["distance"]], "held": {"end": None}}


@pytest.mark.parametrize("factor", ["needle", "end", "distance"])
def test_a_planted_effect_of_each_factor_is_found_and_attributed_in_the_crossed_design(factor):
    found = 0
    for seed in range(6):
        s = FactorScenario(design="crossed", **{f"{factor}_pp": 35.0}, drift_pp=30.0)
        claims = factor_claims(simulate_factors(s, np.random.default_rng([seed, 1])), seed, 300)
        found += claims == {factor}
    assert found >= 5, f"{factor}: attributed alone in {found} of 6"


def test_each_factors_range_interval_covers_its_planted_size_and_reaches_zero_without_one():
    """A 35 pp prompt-end effect in the crossed design (issue #47's size by factor): the end
    factor's max - min interval covers 35 pp, the needle's and the distance's reach 0."""
    covers = reach_zero = 0
    for seed in range(6):
        s = FactorScenario(design="crossed", end_pp=35.0, drift_pp=30.0)
        m = analyze_arrays(simulate_factors(s, np.random.default_rng([seed, 2])), seed=seed, n_resamples=300)
        tests = {t["name"]: t for t in m["factors"]["tests"]}
        low, high = tests["end"]["range_ci_pp"]
        covers += low <= 35.0 <= high and low > 0
        reach_zero += sum(tests[f]["range_ci_pp"][0] == 0.0 for f in ("needle", "distance"))
    assert covers >= 5 and reach_zero >= 10, (covers, reach_zero)


@pytest.mark.slow
@pytest.mark.parametrize("design", ["crossed", "shift-needle"])
def test_no_factor_is_claimed_beyond_alpha_without_an_effect_under_drift(design):
    """The fast subset of the calibration table (docs/sweeps.md, 'Statistics by factor')."""
    n = 60
    s = FactorScenario(design=design, drift_pp=50.0, n_contents=40)
    rate = calibrate_factors(s, n, seed=3, n_resamples=200)["any"]
    assert rate <= binomial_bound(ALPHA, n), f"{design}: a factor claimed in {rate:.0%} of null sweeps"


def test_a_prompt_end_effect_under_shift_needle_is_found_between_contents_not_blamed_on_the_needle():
    r = simulate_factors(FactorScenario(design="shift-needle", end_pp=70.0), np.random.default_rng(4))
    m = analyze_arrays(r, seed=0, n_resamples=400)
    sentence = m["verdict"]["sentence"]
    assert "factor:end" in m["verdict"]["claims"] and "gap" not in m["verdict"]["claims"]
    assert "the prompt end's phase (prompt length ≡ 3 mod 4" in sentence and "between contents" in sentence


def test_a_tied_design_says_the_effect_could_follow_either_factor():
    r = simulate_factors(
        FactorScenario(design="shift-needle", needle_pp=35.0, end_start="one"), np.random.default_rng(5)
    )
    sentence = analyze_arrays(r, seed=0, n_resamples=400)["verdict"]["sentence"]
    assert sentence.startswith("phase effect")
    assert "moves the needle's phase and the distance's phase together" in sentence
    assert "it holds the prompt end's phase fixed" in sentence


def test_shift_end_reads_the_prompt_ends_phase():
    r = simulate_factors(FactorScenario(design="shift-end", end_pp=35.0, end_start="one"), np.random.default_rng(6))
    m = analyze_arrays(r, seed=0, n_resamples=400)
    assert m["phase_of"] == "end" and m["verdict"]["worst_phase"] == (3 - 100) % 4
    assert "this design holds the needle" in m["verdict"]["sentence"]


def test_contents_fixed_at_every_offset_are_named_not_sent_for_more_samples():
    r = simulate_factors(FactorScenario(design="shift-needle", mean=1.5, difficulty=0.0), np.random.default_rng(0))
    r.correct[r.content < 4] = np.where(r.offset[r.content < 4] % 2 == 0, 1.0, 0.0)  # 4 contents vary
    r.correct[(r.content >= 4) & (r.content < 15)] = 0.0  # 11 wrong at every offset
    r.correct[r.content >= 15] = 1.0  # the rest right at every offset
    m = analyze_arrays(r, seed=0, n_resamples=200)
    assert m["fixed_contents"] == {"n_contents": 60, "always_wrong": 11, "always_right": 45}
    sentence = m["verdict"]["sentence"]
    assert "raise --samples" not in sentence
    assert "11 of 60 contents are wrong at every offset" in sentence


@pytest.mark.parametrize("name", ["deepseek-v4", "qwen3"])
def test_the_crossed_design_keeps_the_needle_beyond_the_raw_window_at_the_default_offsets(name):
    """The README's crossed command (--local 128, offsets 0:24, the default pair format) was refused:
    the room for the needle counted the filler before the question, which some offsets do not get."""
    tok = named_tokenizer(name)
    probe = TextKVRetrievalProbe(tok, TextKVSpec(design="crossed"), bos_id=tok.bos_token_id, min_gap=132, step=4)
    items = probe.items(OFFSETS, 4, np.random.default_rng(0))
    assert min(it.answer_pos - 1 - it.value_last for it in items) >= 132


def test_no_factor_is_tested_on_a_trend_that_failed_its_checks(monkeypatch):
    """Issue #56: the phase statistics were withheld, but the unchecked degree was passed on and the
    factor tests ran on it (5 of 215 withheld null sweeps claimed a factor)."""
    from phasescope.analysis import phase_effects, stats
    from phasescope.analysis.trend import TrendChoice

    unchecked = TrendChoice(degree=2, checked=False, lof_p=0.001, max_degree=4, note="the trend failed its checks")
    monkeypatch.setattr(phase_effects, "select_trend", lambda *args, **kwargs: unchecked)
    monkeypatch.setattr(stats, "select_trend", lambda *args, **kwargs: unchecked)  # mod 8 fails its checks too
    r = simulate_factors(FactorScenario(end_pp=40.0), np.random.default_rng(9))
    m = analyze_arrays(r, seed=0, n_resamples=200)
    assert m["gap_p_value"] is None and "withheld" in m["inference_note"]
    assert all(t["p_value"] is None and t["note"].startswith("not tested") for t in m["factors"]["tests"])
    assert not [c for c in m["verdict"]["claims"] if c.startswith("factor:")]


def test_the_needles_line_beside_a_factor_claim_names_uneven_cells():
    """'not the needle's phase (p = 0.9) ... the needle's phase alone: phase effect 7.6 pp' on a crossed run
    whose cells hold 67 to 80 records (#56 item 3): the needle's line is not adjusted for the prompt end,
    and the uneven cells are named as why it shows part of the prompt end's effect."""
    from phasescope.analysis.verdict import verdict

    def test(name, p, worst):
        rows = [{"phase": q, "effect_pp": -12.0 if q == worst else 4.0} for q in range(4)]
        return {"name": name, "members": [name], "kind": "within", "p_value": p, "phases": rows,
                "worst_phase": worst, "period": 4}  # fmt: skip

    rows = [{"phase": p, "accuracy": 0.6, "effect_pp": e} for p, e in zip(range(4), [-5, 2, 2, 1], strict=True)]
    factors = {"groups": [["needle"], ["end"]], "held": {}, "align": 0, "step": 4,
               "tests": [test("needle", 0.9, 0), test("end", 0.0001, 3)], "cells": {"min": 67, "max": 80}}  # fmt: skip
    m = {"step": 4, "overall_accuracy": 0.6, "phases": rows, "gap_pp": 7.6, "gap_ci_pp": [2.8, 15.0],
         "gap_p_value": 0.0025, "period": {"detected": 4, "kind": "step", "p_value": 0.2},
         "phase_dependence": {"p_value": 0.5}, "factors": factors}  # fmt: skip
    v = verdict(m)
    assert v["kind"] == "factor" and "gap" in v["claims"] and "factor:end" in v["claims"]
    assert "not the needle's phase (p = 0.9)" in v["sentence"]
    uneven = "the needle's phase alone (not adjusted for the other factors' phases, and their cells are uneven: 67 to"
    assert uneven in v["sentence"]
    even = verdict({**m, "factors": {**factors, "cells": {"min": 75, "max": 75}}})
    assert "the needle's phase alone (not adjusted for the other factors' phases): phase effect" in even["sentence"]
    both = {**factors, "tests": [test("needle", 0.0001, 0), test("end", 0.0001, 3)]}
    assert "the needle's phase alone: phase effect" in verdict({**m, "factors": both})["sentence"]


def test_each_factor_gets_an_equal_share_of_the_verdicts_alpha():
    """Plain Holm spent four shares of alpha on the needle's phase (gap, period, multiple, its factor
    test) beside one on the prompt end (#56 item 5); the weighted family gives each factor test an
    equal share and the phase statistics one between them; equal weights are plain Holm."""
    from phasescope.analysis.verdict import holm, verdict_weights

    p = {"gap": 0.3, "period": 0.4, "dependence": 0.5, "factor:needle": 0.6, "factor:end": 0.02}
    assert holm(p, dict.fromkeys(p, 0.2)) == pytest.approx(holm(p))
    assert holm(p)["factor:end"] == pytest.approx(0.1)  # fifth of alpha: not claimed
    rows = [{"phase": q, "effect_pp": 0.0} for q in range(4)]
    tests = [{"name": f, "members": [f], "kind": "within", "p_value": p[f"factor:{f}"], "phases": rows,
              "worst_phase": 0, "period": 4} for f in ("needle", "end")]  # fmt: skip
    m = {"step": 4, "overall_accuracy": 0.6, "phases": [], "gap_p_value": 0.3, "period": {"p_value": 0.4},
         "n_contents": 60, "phase_dependence": {"p_value": 0.5},
         "factors": {"groups": [["needle"], ["end"]], "tests": tests}}  # fmt: skip
    weights = verdict_weights(m)
    third, ninth = pytest.approx(1 / 3), pytest.approx(1 / 9)
    assert weights == {"factor:end": third, "factor:needle": third, "gap": ninth, "period": ninth, "dependence": ninth}
    assert holm(p, weights)["factor:end"] == pytest.approx(0.06)  # a third of alpha at the first step
    assert holm({**p, "factor:end": 0.015}, weights)["factor:end"] == pytest.approx(0.045)  # plain Holm: 0.075
    assert set(verdict_weights({**m, "factors": None}).values()) == {1.0}  # no factor apart: plain Holm


def test_a_trend_checked_next_to_the_longest_residues_serves_the_factor_tests():
    """A needle effect every 8 tokens fails the step-4 trend's checks; withholding every factor test
    there found it in about half the sweeps (#56). The factor tests read residues mod 8, so a trend
    checked next to those serves them: the needle's factor is tested and named mod 8."""
    scenario = FactorScenario(needle_pp=30.0, period=8, worst=5)
    for seed in range(12):
        m = analyze_arrays(simulate_factors(scenario, np.random.default_rng([seed, 8])), seed=seed, n_resamples=200)
        if m["gap_p_value"] is None and "withheld" in (m["inference_note"] or ""):
            break
    else:
        pytest.fail("no simulated sweep withheld the step-4 trend")
    needle = next(t for t in m["factors"]["tests"] if t["name"] == "needle")
    assert needle["p_value"] is not None and needle["period"] == 8
    assert "factor:needle" in m["verdict"]["claims"]


def test_class_effects_beyond_100_pp_are_withheld_and_the_reading_says_so():
    """A factor whose classes are collinear with the drift gave class effects of +-900 pp (tiny-s8's
    needle mod 16 over 64 offsets, issue #60's reproduction) and ranges of 106-138 pp (tiny-v4.1's
    needle): no two accuracies are more than 100 pp apart,
    so the effects are withheld with a note and the reading names the factor as not tested instead
    of saying that no factor shows an effect."""
    from phasescope.analysis.factors import _unidentified, reading

    def test(name, effects, p):
        rows = [{"phase": i, "effect_pp": e, "effect_ci_pp": [e - 1, e + 1]} for i, e in enumerate(effects)]
        return {"name": name, "members": [name], "kind": "within", "phases": rows, "period": len(effects),
                "range_pp": max(effects) - min(effects), "worst_phase": 0, "best_phase": 1, "p_value": p,
                "note": None}  # fmt: skip

    wild = test("needle", [630.6, -912.9, 12.9, 269.4], 0.001)
    assert _unidentified(wild) and wild["range_pp"] is None and "cannot be told from the drift" in wild["note"]
    assert all(row["effect_pp"] is None for row in wild["phases"])
    assert not _unidentified(test("needle", [-40.0, 60.0, 0.0, -20.0], 0.001))  # large but possible: kept
    assert _unidentified(test("needle", [-69.2, 69.2, 0.0, 0.0], 0.001))  # a 138 pp range: seen at step 2

    wild["p_value"] = None
    factors = {"tests": [wild, test("end", [0.4, -0.4], 0.43)], "groups": [], "held": {}, "align": 0}
    text = reading(factors, {"factor:end": 0.43}, step=8, alpha=0.05)
    assert text.startswith("no tested factor's phase shows an effect: the prompt end's phase")
    assert "not tested: the needle's phase" in text
