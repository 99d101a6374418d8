"""Calibration and power of the paired departure tests (analysis/departures.py) on simulated pairs
of runs (analysis/simulate_pairs.py): how often B is declared to depart, how often some factor is
claimed when the fault follows none, and how often a fault keyed on one factor is found, with its
period named.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/paired_calibration.py [--sims 300] [--perms 500] [--write]

``--write`` puts the table into docs/sweeps.md ('Paired comparison'). ``--only TEXT`` runs the rows
whose name contains TEXT (no writing).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from phasescope.analysis.simulate import binomial_bound
from phasescope.analysis.simulate_factors import FactorScenario
from phasescope.analysis.simulate_pairs import PairScenario, calibrate_pairs

sys.path.insert(0, str(Path(__file__).parent))
from _markdown import rate_cells, replace_block, table  # noqa: E402

DOCS = Path(__file__).resolve().parents[1] / "docs" / "sweeps.md"


def reference(**kw) -> FactorScenario:
    """A: the crossed design, 40 pp drift over the offsets, contents of uneven difficulty."""
    return FactorScenario(**({"drift_pp": 40.0} | kw))


ROWS = [
    ("healthy (B = A)", PairScenario(reference=reference())),
    ("healthy, nondeterministic: A and B each flip 5%", PairScenario(reference=reference(), noise=0.05)),
    (
        "healthy, nondeterministic 5%, 20 contents",
        PairScenario(reference=reference(n_contents=20), noise=0.05),
    ),
    ("10% broken at random, 20 contents", PairScenario(reference=reference(n_contents=20), rate=0.1)),
    ("10% broken at random, 60 contents", PairScenario(reference=reference(), rate=0.1)),
    ("10% broken at random, A has a -25 pp needle effect", PairScenario(reference=reference(needle_pp=25), rate=0.1)),
    (
        "10% broken at random, A -25 pp needle, 200 contents",
        PairScenario(reference=reference(needle_pp=25, n_contents=200), rate=0.1),
    ),
    (
        "10% broken at random, shift-needle, A -25 pp needle",
        PairScenario(reference=reference(design="shift-needle", needle_pp=25), rate=0.1),
    ),
    (
        "10% flipped at prompt length ≡ 3 mod 4",
        PairScenario(reference=reference(), mode="flip", rate=0.1, where=("end", 4, 3)),
    ),
    (
        "10% flipped at prompt length ≡ 3 mod 4, 20 contents",
        PairScenario(reference=reference(n_contents=20), mode="flip", rate=0.1, where=("end", 4, 3)),
    ),
    ("10% broken at prompt length ≡ 3 mod 4", PairScenario(reference=reference(), rate=0.1, where=("end", 4, 3))),
    ("30% broken at prompt length ≡ 5 mod 8", PairScenario(reference=reference(), rate=0.3, where=("end", 8, 5))),
    ("30% broken at needle phase 3", PairScenario(reference=reference(), rate=0.3, where=("needle", 4, 3))),
    ("30% broken at distance ≡ 1 mod 4", PairScenario(reference=reference(), rate=0.3, where=("distance", 4, 1))),
    (
        "30% broken at prompt length ≡ 1 mod 2, step 2",
        PairScenario(reference=reference(step=2), rate=0.3, where=("end", 2, 1)),
    ),
    (
        "30% broken at prompt length ≡ 5 mod 8, step 2",
        PairScenario(reference=reference(step=2), rate=0.3, where=("end", 8, 5)),
    ),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=300, help="simulated pairs of runs per row")
    parser.add_argument("--perms", type=int, default=500, help="permutations per test")
    parser.add_argument("--only", default=None, help="run the rows whose name contains this (no writing)")
    parser.add_argument("--write", action="store_true", help="write the table into docs/sweeps.md")
    args = parser.parse_args()
    start = time.perf_counter()
    rows = []
    for i, (name, scenario) in enumerate(ROWS):
        if args.only and args.only not in name:
            continue
        rates = calibrate_pairs(scenario, args.sims, seed=2000 + i, n_permutations=args.perms)
        cells = rate_cells(rates, ("departs", "claimed"), ("found", "period"), scenario.where is not None)
        rows.append([name, *cells, f"{100 * rates['wrong']:.1f}%"])
        print(rows[-1], flush=True)
    elapsed = time.perf_counter() - start
    bound = 100 * (binomial_bound(0.05, args.sims) - 0.05)
    text = "\n\n".join(
        [
            f"Command: `OMP_NUM_THREADS=1 .venv/bin/python experiments/paired_calibration.py --sims {args.sims} "
            f"--perms {args.perms} --write` ({elapsed / 60:.0f} min here, one core). A: the crossed design, 60 "
            "contents x 24 offsets at step 4 unless the row says otherwise, a 40 pp drift over the offsets, contents "
            "of uneven difficulty; B: A with the fault of the row. *Departs*: the family's smallest Holm-adjusted p "
            "below 5% (what fails `compare --paired --max-departures` above the count); *claimed*: some factor named "
            "as what the departures follow; *found*: the faulty factor named; *period*: named at the fault's period "
            "(and no other); *wrong*: a factor named that has no fault. Alpha = 5%; a rate over "
            f"{args.sims} runs is measured to about ±{bound:.1f} points (2 s.e.).",
            table(["B's fault", "departs", "claimed", "found", "period", "wrong"], rows),
        ]
    )
    print(text)
    if args.write and not args.only:
        replace_block(DOCS, "paired-calibration", text)


if __name__ == "__main__":
    main()
