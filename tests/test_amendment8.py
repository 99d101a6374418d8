"""Amendment 8's rule (reproduce/amendment8.py) on planted depth profiles: the factor that shapes the
profile is named, a null 2 x 2 names none, and a cell short of seeds gives no reading."""

import numpy as np
import pytest

from phasescope.reproduce.amendment7 import SWEPT_AT
from phasescope.reproduce.amendment8 import CELLS, SEEDS, depth_slope, judge_amendment8, markdown


def rows_for(slopes: dict[str, float], seeds=SEEDS, noise: float = 1.0, rng_seed: int = 0, accuracy: float = 0.8):
    """Sweep rows whose gap is 10 pp at depth 0.5 and changes by slopes[recipe] pp per unit depth."""
    rng = np.random.default_rng(rng_seed)
    rows = []
    for recipe, slope in slopes.items():
        for seed in seeds:
            for depth, variant in SWEPT_AT.items():
                gap = 10.0 + slope * (depth - 0.5) + rng.normal(0, noise)
                rows.append(
                    {"recipe": recipe, "seed": seed, "variant": variant, "gap_pp": gap, "eval_accuracy": accuracy}
                )
    return rows


def test_slope_is_the_least_squares_slope_and_needs_four_depths():
    assert depth_slope({0.0: 0.0, 0.25: 5.0, 0.5: 10.0, 0.75: 15.0, 1.0: 20.0}) == pytest.approx(20.0)
    assert depth_slope({0.0: 0.0, 0.25: None, 0.5: 10.0, 0.75: 15.0, 1.0: 20.0}) == pytest.approx(20.0)
    assert depth_slope({0.0: 0.0, 0.25: None, 0.5: None, 0.75: 15.0, 1.0: 20.0}) is None


@pytest.mark.parametrize(
    ("slopes", "expected"),
    [
        ({"tiny-s2": 10, "tiny-s2-channel": -20, "tiny-s4": 10, "tiny-s4-channel": -20}, "the pooler"),
        ({"tiny-s2": -20, "tiny-s2-channel": -20, "tiny-s4": 10, "tiny-s4-channel": 10}, "the step"),
        ({"tiny-s2": -20, "tiny-s2-channel": 10, "tiny-s4": 10, "tiny-s4-channel": 10}, "both"),
    ],
)
def test_the_planted_factor_is_named(slopes, expected):
    results = [judge_amendment8(rows_for(slopes, rng_seed=s)) for s in range(40)]
    # the other tests may claim falsely at most at alpha (5%, Holm over three): 2 of 40 expected
    assert sum(r["reading"] == expected for r in results) >= 35
    assert f"**{expected}**" in markdown(next(r for r in results if r["reading"] == expected))


def test_no_effect_is_read_as_neither_at_about_alpha():
    flat = dict.fromkeys(CELLS, 5.0)
    readings = [judge_amendment8(rows_for(flat, noise=3.0, rng_seed=s))["reading"] for s in range(60)]
    assert readings.count("neither") >= 54  # family-wise 5% of 60 is 3 expected false readings


def test_a_cell_short_of_counted_seeds_gives_no_reading_and_a_spare_stands_in():
    slopes = {"tiny-s2": 10, "tiny-s2-channel": -20, "tiny-s4": 10, "tiny-s4-channel": -20}
    rows = rows_for(slopes)
    for r in rows:  # seed 17 of the channel step 4 did not learn
        if r["recipe"] == "tiny-s4-channel" and r["seed"] == 17:
            r["eval_accuracy"] = 0.05
    short = judge_amendment8(rows)
    assert short["reading"] == "no reading" and short["short_cells"] == ["tiny-s4-channel"]
    spare = rows_for({"tiny-s4-channel": -20}, seeds=(19,), rng_seed=1)
    stood_in = judge_amendment8(rows + spare)
    assert stood_in["cells"]["tiny-s4-channel"]["seeds"] == [16, 18, 19]
    assert stood_in["reading"] != "no reading" and "adjusted_p" in stood_in
