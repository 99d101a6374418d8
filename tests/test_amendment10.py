"""Amendment 10 (issue #60 item 6): the period, the gap's change across the indexer's threshold
against the dense control, and the factor at each length, judged by the rules committed first; and
the sweeps that read a model below and above the threshold."""

from __future__ import annotations

import json

import pytest

from phasescope.reproduce.amendment10 import CONTROL, INDEXER, judge_amendment10
from phasescope.reproduce.extended_results import amendment10_lines
from phasescope.reproduce.matrix import DEMO, MATRIX, THRESHOLD_VARIANTS
from phasescope.reproduce.run import sweep_one, variants_of

BELOW, ABOVE = THRESHOLD_VARIANTS


def swept(recipe, seed, variant, gap, accuracy=0.6, period=4, period_p=0.001, eval_accuracy=0.6):
    needle = {"adjusted_p": 0.001, "p": 0.001, "range_pp": gap, "range_ci_pp": [gap - 3, gap + 3]}
    other = {"adjusted_p": 0.5, "p": 0.5, "range_pp": 1.0, "range_ci_pp": [0.0, 2.0]}
    return {"recipe": recipe, "seed": seed, "variant": variant, "step": 4, "eval_accuracy": eval_accuracy,
            "mean_accuracy": accuracy, "gap_pp": gap, "gap_ci_pp": [gap - 3, gap + 3], "period": period,
            "period_p": period_p, "period_kind": "step", "factors": {"needle": needle, "end": other,
            "distance": other}}  # fmt: skip


def rows(indexer_change, control_change=(0.0, 1.0, -1.0)):
    out = []
    for seed, (mine, theirs) in enumerate(zip(indexer_change, control_change, strict=True)):
        out += [swept(INDEXER, seed, BELOW, 10.0), swept(INDEXER, seed, ABOVE, 10.0 + mine)]
        out += [swept(CONTROL, seed, BELOW, 12.0), swept(CONTROL, seed, ABOVE, 12.0 + theirs)]
    return out


def test_a_gap_that_grows_only_past_the_threshold_reads_widens():
    a10 = judge_amendment10(rows((9.0, 11.0, 10.0)))
    assert a10["gap"]["reading"] == "widens" and a10["gap"]["welch"]["diff"] == pytest.approx(10.0)
    assert a10["period"]["verdict"] == "holds"
    assert a10["factor"][BELOW]["reading"] == a10["factor"][ABOVE]["reading"] == "needle"
    text = "\n".join(amendment10_lines(a10))
    assert "### 10b: the gap across the threshold: **widens**" in text
    assert f"| `{INDEXER}` | 0 | 10.0 [7.0, 13.0] | 19.0 [16.0, 22.0] | +9.0 | 60.0 → 60.0 |" in text
    assert "2,048 tokens" in text and "16,384 positions" in text
    assert "The sparse indexer widens the gap here" in text and "--context-tokens 1536,3072" in text


def test_a_change_the_control_shares_is_no_change_and_says_how_large_one_could_be():
    a10 = judge_amendment10(rows((5.0, 7.0, 3.0), control_change=(4.0, 6.0, 5.0)))
    gap = a10["gap"]
    assert gap["reading"] == "no change shown" and gap["welch"]["ci_low"] < 0 < gap["welch"]["ci_high"]
    assert gap["largest_pp"] == pytest.approx(max(-gap["welch"]["ci_low"], gap["welch"]["ci_high"]))
    assert f"a change up to {gap['largest_pp']:.1f} pp cannot be excluded" in "\n".join(amendment10_lines(a10))
    assert judge_amendment10(rows((-9.0, -11.0, -10.0)))["gap"]["reading"] == "narrows"


def test_a_seed_that_did_not_learn_is_not_counted_and_a_lost_period_fails():
    data = rows((9.0, 11.0, 10.0))
    data = [r | {"eval_accuracy": 0.05} if r["recipe"] == INDEXER and r["seed"] == 2 else r for r in data]
    a10 = judge_amendment10(data)
    assert a10["gap"]["reading"] == "inconclusive" and sorted(a10["gap"]["indexer_pp"]) == [0, 1]
    assert a10["period"]["verdict"] == "inconclusive"  # two counted seeds: too few
    lost = [r | {"period": None, "period_p": 0.4} if r["variant"] == ABOVE and r["seed"] == 1 else r
            for r in rows((9.0, 11.0, 10.0))]  # fmt: skip
    assert judge_amendment10(lost)["period"]["verdict"] == "fails"
    assert judge_amendment10([r for r in data if r["recipe"] != INDEXER]) is None  # nothing of it swept


def test_the_indexer_recipe_and_its_control_are_swept_at_both_lengths():
    entries = {e.recipe: e for e in MATRIX}
    for recipe in (INDEXER, CONTROL):
        assert set(THRESHOLD_VARIANTS) <= set(variants_of(entries[recipe], held_out=False))
    assert not set(THRESHOLD_VARIANTS) & set(variants_of(entries[CONTROL], held_out=True))


def test_a_threshold_sweep_places_prompts_under_its_context_length(tmp_path):
    entry = next(e for e in MATRIX if e.recipe == CONTROL)
    row = sweep_one(entry, 0, DEMO / "deepseek-v4-tiny", tmp_path, BELOW, samples=8, resamples=100)
    assert set(row["factors"]) == {"needle", "end", "distance"}
    run = tmp_path / "runs" / f"{CONTROL}-s0-crossed-ctx64"
    lengths = [json.loads(line)["answer_pos"] for line in (run / "records.jsonl").read_text().splitlines()]
    spec = json.loads((run / "spec.json").read_text())
    assert lengths and max(lengths) < 64 and spec["probe"]["context_tokens"] == 64
