"""Amendment 7 (issue #47): each seed's factor named from the Holm-adjusted factor tests, a
recipe's reading over its counted seeds, step 2's depth reading, held-out seeds kept out of the
earlier rules' verdicts, and a crossed sweep of a shipped model giving the factor columns."""

from __future__ import annotations

import json

import pytest

from phasescope.reproduce.amendment7 import depth_reading, depth_table, factor_name, judge_amendment7
from phasescope.reproduce.extended_results import amendment7_lines
from phasescope.reproduce.matrix import DEMO, MATRIX, Entry
from phasescope.reproduce.run import DEFAULT_SEEDS, all_seeds, sweep_one, variants_of


def factors(needle=0.5, end=0.5, distance=0.5, size=12.0):
    adjusted = {"needle": needle, "end": end, "distance": distance}
    return {
        f: {"adjusted_p": p, "p": p, "range_pp": size, "range_ci_pp": [size - 4, size + 4]} for f, p in adjusted.items()
    }


def crossed(recipe, seed, eval_accuracy=0.6, **kw):
    return {"recipe": recipe, "seed": seed, "variant": "crossed-24", "eval_accuracy": eval_accuracy,
            "factors": factors(**kw), "held_out": seed >= 12}  # fmt: skip


@pytest.mark.parametrize(
    ("adjusted", "name"),
    [
        ({"needle": 0.001}, "needle"),
        ({"end": 0.01}, "end"),
        ({"distance": 0.049}, "distance"),
        ({"distance": 0.05}, "none"),  # adjusted p must be below alpha
        ({"needle": 0.001, "distance": 0.01}, "several"),
        ({}, "none"),
    ],
)
def test_a_seed_names_the_one_factor_whose_adjusted_p_is_below_alpha(adjusted, name):
    assert factor_name(factors(**adjusted)) == name


def test_a_recipe_reads_the_factor_every_counted_seed_names_else_mixed():
    rows = [crossed("tiny-s4", s, needle=0.001) for s in (0, 1, 2, 12, 13)]
    rows.append(crossed("tiny-s4", 14, eval_accuracy=0.05, end=0.001))  # below the floor: not counted
    a7 = judge_amendment7(rows)
    reading = a7["factors"]["tiny-s4"]
    assert reading["reading"] == "needle" and [s["seed"] for s in reading["seeds"]] == [0, 1, 2, 12, 13]
    assert reading["mean_size_pp"] == pytest.approx(12.0)
    rows[1] = crossed("tiny-s4", 1, end=0.001)
    assert judge_amendment7(rows)["factors"]["tiny-s4"]["reading"] == "mixed"
    text = "\n".join(amendment7_lines(judge_amendment7(rows)))
    assert (
        "`tiny-s4`: **mixed** over the 5 seeds" in text and "s1 end 12.0 [8.0, 16.0]" in text and "s12* needle" in text
    )


def depth_rows(recipe, step, periodic_at, seeds):
    variants = {0.0: "depth-0", 0.25: "depth-0.25", 0.5: "plain", 0.75: "depth-0.75", 1.0: "depth-1"}
    return [
        {"recipe": recipe, "seed": s, "variant": v, "step": step, "eval_accuracy": 0.7, "gap_pp": 10.0 if d in
         periodic_at else 1.0, "period": step if d in periodic_at else None, "period_p": 0.001 if d in periodic_at
         else 0.4}
        for d, v in variants.items()
        for s in seeds
    ]  # fmt: skip


def test_step_two_depth_reading_follows_the_pre_set_patterns():
    control = depth_rows("tiny-s4", 4, {0.0, 0.25, 0.5, 0.75, 1.0}, (0, 1, 2))
    far_only = depth_rows("tiny-v4.1", 2, {0.0, 0.25, 0.5}, (0, 1, 12))
    assert judge_amendment7(far_only + control)["depth"]["reading"] == (
        "step 2 holds only with the needle far from the question"
    )
    everywhere = depth_rows("tiny-v4.1", 2, {0.0, 0.25, 0.5, 0.75, 1.0}, (0, 1, 12))
    assert judge_amendment7(everywhere + control)["depth"]["reading"] == "step 2 holds at every depth"
    weak_control = depth_rows("tiny-s4", 4, {0.5}, (0, 1, 2))
    assert depth_reading(depth_table(far_only, "tiny-v4.1"), depth_table(weak_control, "tiny-s4")) == "no reading"
    withheld = [r | {"period_p": None, "gap_pp": None} if r["seed"] == 1 and r["variant"] == "depth-1" else r
                for r in far_only]  # fmt: skip
    assert [row["withheld"] for row in depth_table(withheld, "tiny-v4.1")][-1] == [1]
    assert "| 1 | 0 of 3 () | 1 | 1.0 ± 0.0 |" in "\n".join(amendment7_lines(judge_amendment7(withheld + control)))
    table = depth_table(far_only, "tiny-v4.1")
    assert [(row["depth"], row["at_step"]) for row in table][-1] == (1.0, []) and table[2]["gap_mean_pp"] == 10.0


def test_held_out_seeds_are_swept_for_amendment_7_and_the_every_seed_summaries():
    s4 = next(e for e in MATRIX if e.recipe == "tiny-s4")
    assert all_seeds(s4, DEFAULT_SEEDS) == [0, 1, 2, 12, 13, 14, 15]  # issue #60: every seed trained
    assert all_seeds(s4, 1) == [0]  # a quick reproduction sweeps no held-out seed
    assert variants_of(s4, held_out=True) == ["plain", "crossed-24", "depth-0", "depth-0.25", "depth-0.75", "depth-1"]
    assert "kv-gaps" in variants_of(s4, held_out=False) and "crossed-24" in variants_of(s4, held_out=False)


def test_a_crossed_sweep_of_a_shipped_model_gives_each_factors_adjusted_p_and_size(tmp_path):
    row = sweep_one(Entry("tiny-s4"), 0, DEMO / "tiny-s4", tmp_path, "crossed-24", samples=12, resamples=100)
    assert set(row["factors"]) == {"needle", "end", "distance"}
    for t in row["factors"].values():
        assert t["range_pp"] >= 0 and t["adjusted_p"] is not None and t["adjusted_p"] >= t["p"]
    plain = sweep_one(Entry("tiny-s4"), 0, DEMO / "tiny-s4", tmp_path, "depth-1", samples=12, resamples=100)
    spec = json.loads((tmp_path / "runs" / "tiny-s4-s0-depth1" / "spec.json").read_text())
    assert plain["factors"] is None and spec["probe"]["depth"] == 1.0


def with_bound(row, factor, ci):
    row["factors"][factor]["range_ci_pp"] = ci
    return row


def test_a_reading_bounds_the_factors_it_does_not_name():
    """Issue #60 item 2: 'below X' only when every seed puts the other factor's upper end under the
    named factor's lower end; otherwise 'cannot be excluded up to X', X the largest upper end."""
    rows = [crossed("tiny-s4", s, needle=0.001) for s in (0, 1, 2)]  # needle [8, 16] on every seed
    for row, (end_hi, distance_hi) in zip(rows, [(5.0, 7.9), (3.0, 9.5), (6.5, 2.0)], strict=True):
        with_bound(with_bound(row, "end", [0.0, end_hi]), "distance", [0.0, distance_hi])
    others = judge_amendment7(rows)["factors"]["tiny-s4"]["others"]
    assert others == {"end": {"bound_pp": 6.5, "below": True}, "distance": {"bound_pp": 9.5, "below": False}}
    text = "\n".join(amendment7_lines(judge_amendment7(rows)))
    assert "the prompt end's effect is below 6.5 pp and the distance's effect cannot be excluded up to 9.5 pp" in text
    with_bound(rows[0], "end", None)  # a seed without an interval leaves the factor unbounded
    assert "the prompt end's effect is not bounded" in "\n".join(amendment7_lines(judge_amendment7(rows)))


def test_with_no_factor_named_every_factor_is_bounded_and_none_is_below():
    rows = [with_bound(crossed("tiny-s4", s), "needle", [0.0, 3.0]) for s in (0, 1, 2)]
    others = judge_amendment7(rows)["factors"]["tiny-s4"]["others"]
    assert set(others) == {"needle", "end", "distance"} and not any(b["below"] for b in others.values())
    assert others["needle"]["bound_pp"] == 3.0 and others["end"]["bound_pp"] == 16.0


def test_the_depth_table_counts_a_multiple_whose_step_part_is_significant():
    """Issue #60 item 4: one period rule. tiny-v4.1 seed 13 read '4, multiple, step part p = 0.001';
    the period claims counted it, the depth table did not."""
    from phasescope.reproduce.verdicts import periodic_at_step

    rows = depth_rows("tiny-v4.1", 2, {0.0, 0.25, 0.5, 0.75, 1.0}, (0, 13))
    multiple = {"period": 4, "period_kind": "multiple", "period_p": 0.002, "step_component_p": 0.001}
    rows = [r | multiple if r["seed"] == 13 else r for r in rows]
    assert all(periodic_at_step(r) for r in rows)
    assert all(row["at_step"] == [0, 13] for row in depth_table(rows, "tiny-v4.1"))
    weak = [r | {"step_component_p": 0.3} if r["seed"] == 13 else r for r in rows]
    assert all(row["at_step"] == [0] for row in depth_table(weak, "tiny-v4.1"))


def test_a_seed_whose_factor_tests_were_all_withheld_is_not_tested_not_none():
    """Issue #60's reproduction: tiny-s8's crossed sweeps had every factor test withheld (no trend the
    rule accepts); 'no factor's phase shows an effect' would have said more than was tested."""
    withheld = {f: {"adjusted_p": None, "p": None, "range_pp": None, "range_ci_pp": None} for f in ("needle", "end")}
    assert factor_name(withheld) == "not tested"
    rows = [crossed("tiny-s8", s) | {"factors": withheld} for s in (0, 1, 2)]
    text = "\n".join(amendment7_lines(judge_amendment7(rows)))
    assert "the factors were not tested on any of the 3 seeds" in text and "no factor's phase" not in text
