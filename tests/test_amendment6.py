"""Amendment 6 (issue #34): step 8 read with the whole prompt moving (pad-prefix) beside the
needle moving towards the question (shift-needle); where a multiple or a divisor comes from."""

from phasescope.reproduce.amendment6 import judge_amendment6
from phasescope.reproduce.extended_results import amendment6_lines


def row(seed, variant, period, kind, p=0.001, accuracy=0.35):
    return {"recipe": "tiny-s8", "seed": seed, "variant": variant, "step": 8, "mean_accuracy": accuracy} | {
        "learned": False,
        "period": period,
        "period_kind": kind,
        "period_p": p,
        "gap_pp": 10.0,
        "step_component_p": 0.001 if kind == "multiple" else None,
    }


def readings(rows):
    return {s["seed"]: (s["question"], s["reading"]) for s in judge_amendment6(rows)["per_seed"]}


def test_a_multiple_that_vanishes_at_constant_distance_is_read_as_distance():
    rows = [row(0, "offsets-48", 4, "step"), row(0, "pad-prefix-48", 4, "step")]
    rows += [row(1, "offsets-48", 16, "multiple"), row(1, "pad-prefix-48", 8, "step")]
    rows += [row(2, "offsets-48", 16, "multiple"), row(2, "pad-prefix-48", 16, "multiple")]
    rows += [row(3, "offsets-48", 16, "multiple"), row(3, "pad-prefix-48", 8, "step", p=0.3)]
    rows += [row(4, "offsets-48", 4, "step"), row(4, "pad-prefix-48", 8, "step")]
    rows += [row(5, "offsets-48", 8, "step"), row(5, "pad-prefix-48", 8, "step")]
    assert readings(rows) == {
        0: ("6c", "the model"),
        1: ("6b", "distance"),
        2: ("6b", "alignment"),
        3: ("6b", "neither"),  # pad-prefix found no period at all
        4: ("6c", "the design"),
        5: (None, None),
    }


def test_step_8_at_constant_distance_uses_5fs_rule_and_counts_only_seeds_in_the_band():
    rows = [row(s, "pad-prefix-48", 8, "step") for s in range(3)] + [
        row(s, "offsets-48", 16, "multiple") for s in range(3)
    ]
    a6 = judge_amendment6(rows)
    assert a6["step8_pad_prefix"]["verdict"] == "reproduced"
    rows[2] |= {
        "period": 16,
        "period_kind": "multiple",
        "step_component_p": 0.002,
    }  # a multiple whose step component is significant counts
    assert judge_amendment6(rows)["step8_pad_prefix"]["verdict"] == "reproduced"
    rows[2] |= {"period": 4, "period_kind": "step"}
    assert judge_amendment6(rows)["step8_pad_prefix"]["verdict"] == "inconclusive"
    above = [r | {"mean_accuracy": 0.99} if r["seed"] == 0 else r for r in rows]
    assert [s["seed"] for s in judge_amendment6(above)["per_seed"]] == [1, 2]
    text = "\n".join(amendment6_lines(judge_amendment6(rows)))
    assert "### step 8 at constant distance (6a): **inconclusive**" in text and "6b: **neither**" in text
