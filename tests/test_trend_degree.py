"""The drift's degree is one the data can carry (issue #56 item 2): on sweeps without any drift the
least flexible checked degree (the floor, half the largest separable degree) is chosen, not a
degree anywhere up to the largest (degree 10 over 30 offsets at step 5, before); under a drift the
floor cannot follow, the checks still climb to a more flexible trend."""

import numpy as np
import pytest

from phasescope.analysis.simulate import Scenario, simulate
from phasescope.analysis.stats import analyze_arrays
from phasescope.analysis.trend import floor_degree


def degrees(scenario: Scenario, sims: int, seed: int) -> list[tuple[int | None, int]]:
    """(chosen degree, the floor) per simulated sweep."""
    out = []
    for i in range(sims):
        trend = analyze_arrays(simulate(scenario, np.random.default_rng([seed, i])), seed=i, n_resamples=200)["trend"]
        out.append((trend["degree"], floor_degree(trend["max_separable_degree"])))
    return out


@pytest.mark.slow
def test_without_drift_the_floor_degree_is_chosen():
    no_drift = Scenario("no-effect", step=5, offsets=tuple(range(30)), n_contents=120, drift_pp=0,
                        records_per_cell=(1, 1))  # fmt: skip
    chosen = degrees(no_drift, 20, seed=5)
    assert {floor for _, floor in chosen} == {5}  # 30 offsets at step 5: separable up to 10, floor 5
    at_floor = sum(degree == floor for degree, floor in chosen)
    assert at_floor >= 14, chosen  # a check at 0.1 fails in about 1 in 5 null sweeps; before, 8 in 20


@pytest.mark.slow
def test_a_drift_the_floor_cannot_follow_gets_a_more_flexible_trend():
    steep = Scenario("drift", drift_shape="logistic", drift_pp=60, drift_width=0.1, n_contents=600,
                     records_per_cell=(1, 1))  # fmt: skip
    chosen = degrees(steep, 8, seed=1)
    assert sum(degree is not None and degree > floor for degree, floor in chosen) >= 4, chosen
