"""Which period the verdict names (issue #43): pure step effects (the truth has no other period)
and a pattern of twice the step with no step component, on simulated sweeps of 60 contents.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/period_naming.py [--sims 60]

Prints, per row, how often each period was named (None: none claimed) and the wrong-period count.
"""

from __future__ import annotations

import argparse

import numpy as np

from phasescope.analysis.simulate import Scenario, simulate, simulate_twice_the_step
from phasescope.analysis.stats import analyze_arrays

ONE = (1, 1)  # one record per (content, offset)
STEP_ROWS = {
    "step 5, 0:30, 30 pp, no drift": Scenario("no-effect", step=5, offsets=tuple(range(30)), n_contents=60,
                                              effects_pp=(0, 0, 0, 0, -30), records_per_cell=ONE),
    "step 4, 0:24, 15 pp, linear drift": Scenario("drift", step=4, n_contents=60, effects_pp=(0, 0, 0, -15),
                                                  records_per_cell=ONE, bump_pp=0.0),
    "step 8, 0:48, 15 pp, linear drift": Scenario("drift", step=8, offsets=tuple(range(48)), n_contents=60,
                                                  effects_pp=(0,) * 7 + (-15,), records_per_cell=ONE, bump_pp=0.0),
    "step 2, 0:48, 30 pp, no drift": Scenario("no-effect", step=2, offsets=tuple(range(48)), n_contents=60,
                                              effects_pp=(0, -30), records_per_cell=ONE),
}  # fmt: skip


def tally(draw, n: int, truth: int | None) -> str:
    named = {}
    for i in range(n):
        period = analyze_arrays(draw(i), seed=i, n_resamples=300)["verdict"]["period"]
        named[period] = named.get(period, 0) + 1
    wrong = sum(c for p, c in named.items() if p is not None and p != truth)
    return f"named {dict(sorted(named.items(), key=lambda kv: str(kv[0])))}; wrong {wrong}/{n}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=60, help="simulated sweeps per row")
    n = parser.parse_args().sims
    for name, s in STEP_ROWS.items():
        print(f"{name}: {tally(lambda i, s=s: simulate(s, np.random.default_rng([7, i])), n, s.step)}", flush=True)
    for offsets, pp in ((48, 15.0), (24, 15.0), (48, 0.0)):
        truth = 8 if pp else None
        row = f"period 8 at step 4 (no step component), 0:{offsets}, ±{pp:g} pp"
        draw = lambda i, o=offsets, p=pp: simulate_twice_the_step(i, pp=p, n_offsets=o)  # noqa: E731
        print(f"{row}: {tally(draw, n, truth)}", flush=True)


if __name__ == "__main__":
    main()
