"""Amendment 9's judgement (reproduce/amendment9.py) is 5c's and 5a's own code on the new seeds:
a control inside the 3 pp margin and a step-2 model at period 2 reproduce; one seed outside does not."""

from phasescope.reproduce.amendment9 import CONTROL, SEEDS, STEP2, judge_amendment9, markdown


def rows(control_upper: float = 2.0, step2_period: int = 2):
    out = []
    for seed in SEEDS:
        out.append({"recipe": CONTROL, "seed": seed, "variant": "plain", "mean_accuracy": 0.74, "gap_pp": 0.5,
                    "gap_ci_pp": [0.0, control_upper], "eval_accuracy": 0.74})  # fmt: skip
        out.append({"recipe": STEP2, "seed": seed, "variant": "plain", "mean_accuracy": 0.9, "gap_pp": 20.0,
                    "gap_ci_pp": [18.0, 22.0], "period": step2_period, "period_p": 0.001, "step": 2,
                    "eval_accuracy": 1.0})  # fmt: skip
    return out


def test_both_thresholds_reproduce_on_seeds_that_meet_them():
    result = judge_amendment9(rows())
    assert result["control"]["verdict"] == "reproduced" and result["step2"]["verdict"] == "reproduced"
    text = markdown(result, rows())
    assert "9a: the matched control by 5c's 3 pp margin, new seeds: **reproduced**" in text
    assert "* seed 16: period 2 (p = 0.001), gap 20.0 [18.0, 22.0], sweep accuracy 90.0%" in text


def test_a_margin_missed_or_another_period_is_not_passed():
    assert judge_amendment9(rows(control_upper=4.0))["control"]["verdict"] != "reproduced"
    assert judge_amendment9(rows(step2_period=4))["step2"]["verdict"] == "not reproduced"
