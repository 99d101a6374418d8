"""Which period the verdict names (issue #43) on simulated sweeps of 60 contents, one record per
cell: pure step effects (the truth has no other period) at steps 2-8, a divisor of the step, a
period that is not the step's, and a pattern of twice the step with no step component.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/period_naming.py [--sims 60] [--rows step]

Prints, per row, how often each period was named (None: none claimed) and how often a period
other than the true one was named (the wrong-period rate; at most alpha = 0.05 is the aim).
"""

from __future__ import annotations

import argparse

import numpy as np

from phasescope.analysis.simulate import Scenario, simulate, simulate_twice_the_step
from phasescope.analysis.stats import analyze_arrays

ONE = (1, 1)  # one record per (content, offset)


def _step_row(step: int, n_offsets: int, pp: float, drift: bool) -> Scenario:
    effects = (0.0,) * (step - 1) + (-pp,)
    family = "drift" if drift else "no-effect"
    return Scenario(family, step=step, offsets=tuple(range(n_offsets)), n_contents=60, effects_pp=effects,
                    records_per_cell=ONE, bump_pp=0.0)  # fmt: skip


STEP_ROWS = {  # the table: (step, offsets) at 30 pp without drift and 15 pp with a linear drift
    f"step {step}, 0:{n}, {pp:g} pp, {'linear drift' if drift else 'no drift'}": (_step_row(step, n, pp, drift), step)
    for step, n in ((2, 48), (4, 24), (5, 30), (6, 48), (8, 48), (8, 24))
    for pp, drift in ((30.0, False), (15.0, True))
}
OTHER_ROWS = {
    "period 2 at step 4 (a divisor), 0:24, 30 pp": (
        Scenario("no-effect", step=4, n_contents=60, effects_pp=(0, -30, 0, -30), records_per_cell=ONE), 2),
    "period 5 at step 4 (not the step's), 0:30, 20 pp": (
        Scenario("no-effect", step=4, offsets=tuple(range(30)), n_contents=60, period_pp=(5, 20.0),
                 records_per_cell=ONE), 5),
    "no effect, step 4, 0:24": (Scenario("no-effect", step=4, n_contents=60, records_per_cell=ONE), None),
}  # fmt: skip
STEP4 = dict(step=4, effects_pp=(0, 0, 0, -30), records_per_cell=ONE)
CONFOUND_ROWS = {  # the pure step-4 effect under a real sweep's confounds
    "step 4, 0:24, 30 pp, 12 contents": (Scenario("drift", n_contents=12, bump_pp=0.0, **STEP4), 4),
    "step 4, 0:24, 30 pp, 40% of contents at the ceiling": (
        Scenario("drift", n_contents=60, ceiling_share=0.4, bump_pp=0.0, **STEP4), 4),
    "step 4, 0:24, 30 pp, the hardest 30% miss phase 0": (
        Scenario("drift", n_contents=60, missing=(0, 0.3), bump_pp=0.0, **STEP4), 4),
    "step 4, 0:24, 30 pp, contents at random starts, drift + bump": (
        Scenario("drift+bump", n_contents=60, starts="uniform", **STEP4), 4),
    "step 4, 0:24, 30 pp, AR(1) within contents (rho 0.8, 10 pp), drift": (
        Scenario("drift", n_contents=60, ar=(0.8, 10.0), bump_pp=0.0, **STEP4), 4),
    "no effect, step 4, 0:24, AR(1) within contents (rho 0.8, 10 pp), drift": (
        Scenario("drift", step=4, n_contents=60, ar=(0.8, 10.0), bump_pp=0.0, records_per_cell=ONE), None),
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
    parser.add_argument(
        "--rows", choices=("step", "other", "confound", "twice", "all"), default="all", help="which rows to run"
    )
    args = parser.parse_args()
    n = args.sims
    everything = STEP_ROWS | OTHER_ROWS | CONFOUND_ROWS
    groups = {"step": STEP_ROWS, "other": OTHER_ROWS, "confound": CONFOUND_ROWS, "twice": {}, "all": everything}
    rows = groups[args.rows]
    for name, (s, truth) in rows.items():
        draw = lambda i, s=s: simulate(s, np.random.default_rng([7, i]))  # noqa: E731
        print(f"{name}: {tally(draw, n, truth)}", flush=True)
    if args.rows not in ("twice", "all"):
        return
    for offsets, pp in ((48, 15.0), (24, 15.0), (48, 0.0)):
        truth = 8 if pp else None
        row = f"period 8 at step 4 (no step component), 0:{offsets}, ±{pp:g} pp"
        draw = lambda i, o=offsets, p=pp: simulate_twice_the_step(i, pp=p, n_offsets=o)  # noqa: E731
        print(f"{row}: {tally(draw, n, truth)}", flush=True)


if __name__ == "__main__":
    main()
