"""Calibration and power of the statistics by factor (analysis/factors.py) on simulated sweeps of
every design (analysis/simulate_factors.py): how often the verdict claims a factor when none has
an effect, and how often a planted effect of one factor is found and attributed to it alone.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/factor_calibration.py [--sims 200] [--boot 300] [--write]

``--write`` puts the table into docs/sweeps.md ('Statistics by factor').
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from phasescope.analysis.simulate import binomial_bound
from phasescope.analysis.simulate_factors import FactorScenario, calibrate_factors

sys.path.insert(0, str(Path(__file__).parent))
from _markdown import rate_cells, replace_block, table  # noqa: E402

DOCS = Path(__file__).resolve().parents[1] / "docs" / "sweeps.md"

ROWS = [
    ("crossed, no effect, no drift", FactorScenario(drift_pp=0.0)),
    ("crossed, no effect, 50 pp drift", FactorScenario(drift_pp=50.0)),
    ("crossed, no effect, 50 pp drift, 20 contents", FactorScenario(drift_pp=50.0, n_contents=20)),
    ("crossed, no effect, step 2, 50 pp drift", FactorScenario(step=2, drift_pp=50.0)),
    ("crossed, no effect, step 8 over 64 offsets", FactorScenario(step=8, n_offsets=64, drift_pp=50.0)),
    ("shift-needle, no effect, 50 pp drift", FactorScenario(design="shift-needle", drift_pp=50.0)),
    ("pad-prefix, no effect, 50 pp drift", FactorScenario(design="pad-prefix", drift_pp=50.0)),
    ("crossed, needle -20 pp", FactorScenario(needle_pp=20.0)),
    ("crossed, prompt end -20 pp", FactorScenario(end_pp=20.0)),
    ("crossed, distance -20 pp", FactorScenario(distance_pp=20.0)),
    ("crossed, prompt end -20 pp, 50 pp drift", FactorScenario(end_pp=20.0, drift_pp=50.0)),
    ("crossed, needle -10 pp and prompt end -20 pp", FactorScenario(needle_pp=10.0, end_pp=20.0)),
    ("shift-needle, prompt end -40 pp (between contents)", FactorScenario(design="shift-needle", end_pp=40.0)),
    ("pad-prefix, prompt end -20 pp", FactorScenario(design="pad-prefix", end_pp=20.0)),
    ("crossed, prompt end -30 pp at ≡ 5 mod 8", FactorScenario(end_pp=30.0, period=8, worst=5)),
    (
        "crossed, prompt end -30 pp at ≡ 5 mod 8, 50 pp drift",
        FactorScenario(end_pp=30.0, period=8, worst=5, drift_pp=50.0),
    ),
    ("crossed, prompt end -30 pp at ≡ 1 mod 2", FactorScenario(end_pp=30.0, period=2, worst=1)),
    ("crossed, needle -30 pp at phase 5 mod 8", FactorScenario(needle_pp=30.0, period=8, worst=5)),
    ("crossed, step 2, prompt end -30 pp at ≡ 5 mod 8", FactorScenario(step=2, end_pp=30.0, period=8, worst=5)),
    (
        "shift-needle, prompt end -40 pp at ≡ 5 mod 8 (between)",
        FactorScenario(design="shift-needle", end_pp=40.0, period=8, worst=5),
    ),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=200, help="simulated sweeps per row")
    parser.add_argument("--boot", type=int, default=300, help="bootstrap draws per analysis")
    parser.add_argument("--write", action="store_true", help="write the table into docs/sweeps.md")
    args = parser.parse_args()
    start = time.perf_counter()
    rows = []
    for i, (name, scenario) in enumerate(ROWS):
        rates = calibrate_factors(scenario, args.sims, seed=1000 + i, n_resamples=args.boot)
        planted = any((scenario.needle_pp, scenario.end_pp, scenario.distance_pp))
        cells = rate_cells(rates, ("any",), ("found", "period"), planted)
        rows.append([name, *cells, f"{100 * rates['wrong']:.1f}%"])
        print(rows[-1], flush=True)
    elapsed = time.perf_counter() - start
    bound = 100 * (binomial_bound(0.05, args.sims) - 0.05)
    text = "\n\n".join(
        [
            f"Command: `OMP_NUM_THREADS=1 .venv/bin/python experiments/factor_calibration.py --sims {args.sims} "
            f"--boot {args.boot} --write` ({elapsed / 60:.0f} min here, one core). 60 contents x 24 offsets at "
            "step 4 unless the row says otherwise, one record per cell, contents of their own prompt lengths. "
            "*Any factor*: sweeps whose verdict claims some factor (under the verdict's weighted Holm with its "
            "other tests); "
            f"*found*: the planted factors all claimed; *period*: each named at its planted period (the step unless "
            f"the row says another); *wrong*: a factor claimed that has no effect. Alpha = 5%; "
            f"a rate over {args.sims} sweeps is measured to about ±{bound:.1f} points (2 s.e.).",
            table(["scenario", "any factor", "found", "period", "wrong"], rows),
        ]
    )
    print(text)
    if args.write:
        replace_block(DOCS, "factor-calibration", text)


if __name__ == "__main__":
    main()
