"""Calibration and power of phasescope's statistics on simulated sweeps (DESIGN.md §3).

    .venv/bin/python experiments/calibration.py [--datasets 4000] [--write]

For each scenario (no effect / drift / drift + bump, both designs, several sizes) it
simulates sweeps with a known truth (phasescope.analysis.simulate), analyzes each one and
reports how often each test rejects at alpha = 0.05, how often the gap interval covers the
true gap, and, for contrast, how often the gap test rejects when the drift is ignored
(trend degree 0, the analysis before issue 7). ``--write`` puts the table into
docs/sweeps.md. About 25 minutes on 2 cores at 4000 datasets (the drift-ignored column uses
a quarter of them).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from _markdown import replace_block, table

from phasescope.analysis.phase_effects import legendre_trend
from phasescope.analysis.simulate import DESIGNS, FAMILIES, Scenario, binomial_bound, calibrate

DOCS = Path(__file__).resolve().parents[1] / "docs" / "sweeps.md"


def scenarios() -> dict[str, Scenario]:
    out = {}
    for family in FAMILIES:
        for design in DESIGNS:
            out[f"{family}, {design}, 30 contents x 1-3 records"] = Scenario(family=family, design=design)
    out["drift+bump, shift-needle, 10 contents x 1-3 records"] = Scenario(family="drift+bump", n_contents=10)
    out["drift 0.35 -> 0.85, shift-needle, 300 contents x 1 record"] = Scenario(
        family="drift", n_contents=300, records_per_cell=(1, 1), drift_pp=50, mean_accuracy=0.6
    )
    out["drift+bump, pad-prefix, step 8, 30 contents"] = Scenario(
        family="drift+bump", design="pad-prefix", step=8, base_phase=3
    )
    for design in DESIGNS:
        out[f"contents prefer different phases (sd 30 pp, mean 0), drift, {design}"] = Scenario(
            family="drift", design=design, phase_sd_pp=30
        )
    return out


def leakage(degrees=(1, 3, 6), n=2000) -> list[list[str]]:
    """Spurious gap (pp) that a noise-free 15 pp Gaussian bump (width 3-6 offsets, anywhere in
    0..23) leaves in the phase effects (step 4) after a trend polynomial of each degree."""
    rng = np.random.default_rng(0)
    d = np.arange(24.0)
    dummies = ((1 + d)[:, None] % 4 == np.arange(1, 4)).astype(float)
    bumps = [0.15 * np.exp(-0.5 * ((d - rng.uniform(0, 23)) / rng.uniform(3, 6)) ** 2) for _ in range(n)]
    rows = []
    for degree in degrees:
        x = np.concatenate([np.ones((24, 1)), legendre_trend(d, degree, 0, 23), dummies], axis=1)
        gaps = []
        for f in bumps:
            gamma = np.r_[0, np.linalg.lstsq(x, f, rcond=None)[0][-3:]]
            gaps.append(100 * np.ptp(gamma))
        median, p90 = np.percentile(gaps, [50, 90])
        rows.append([str(degree), f"{median:.2f}", f"{p90:.2f}"])
    return rows


def power() -> dict[str, Scenario]:
    demo = dict(family="drift", n_contents=256, records_per_cell=(1, 1))
    return {
        "5 pp (one phase low), demo size: 256 contents x 24 offsets": Scenario(**demo, effects_pp=(0, 0, 0, -5)),
        "10 pp (one phase low), demo size": Scenario(**demo, effects_pp=(0, 0, 0, -10)),
        "5 pp, 50 contents x 1-3 records, drift+bump": Scenario(
            family="drift+bump", n_contents=50, effects_pp=(0, 0, 0, -5)
        ),
        "10 pp (+5/-5), 30 contents x 1-3 records, drift+bump": Scenario(family="drift+bump", effects_pp=(5, 0, 0, -5)),
    }


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=4000, help="simulated sweeps per scenario")
    parser.add_argument("--boot", type=int, default=499, help="bootstrap draws / permutations per analysis")
    parser.add_argument("--write", action="store_true", help="write the tables into docs/sweeps.md")
    args = parser.parse_args()
    n, start = args.datasets, time.perf_counter()
    null_rows = []
    for i, (name, s) in enumerate(scenarios().items()):
        r = calibrate(s, n, seed=100 + i, n_boot=args.boot)
        naive = calibrate(s, max(n // 4, 200), seed=100 + i, n_boot=args.boot, trend_degree=0)
        null_rows.append(
            [
                name,
                pct(r["gap_rejects"]),
                pct(r["homogeneity_rejects"]),
                pct(r["period_detected"]),
                pct(r["gap_ci_covers"]),
                pct(r["flips_positive"]),
                pct(naive["gap_rejects"]),
            ]
        )
        print(" | ".join(null_rows[-1]), flush=True)
    power_rows = []
    for i, (name, s) in enumerate(power().items()):
        r = calibrate(s, n, seed=200 + i, n_boot=args.boot)
        power_rows.append([name, pct(r["gap_rejects"]), pct(r["period_detected"]), pct(r["gap_ci_covers"])])
        print(" | ".join(power_rows[-1]), flush=True)
    window = {
        "no window effect (phase effect 12 pp, format effect -6 pp)": Scenario(
            family="drift+bump", kv_gaps=(0, 1), effects_pp=(-8, 0, 0, 4), format_pp=-6
        ),
        "window effect +10 pp (same phase and format effects)": Scenario(
            family="drift+bump", kv_gaps=(0, 1), effects_pp=(-8, 0, 0, 4), format_pp=-6, window_pp=10
        ),
    }
    window_rows = []
    for i, (name, s) in enumerate(window.items()):
        r = calibrate(s, n, seed=300 + i, n_boot=args.boot)
        window_rows.append([name, pct(r["window_rejects"]), pct(r["window_ci_covers"])])
        print(" | ".join(window_rows[-1]), flush=True)
    bound = binomial_bound(0.05, n)
    text = "\n\n".join(
        [
            f"Command: `.venv/bin/python experiments/calibration.py --datasets {n} --boot {args.boot} --write` "
            f"({time.perf_counter() - start:.0f} s here). Each row: {n} simulated sweeps over 24 offsets. "
            f"Acceptable false-positive rate: at most alpha + 2 s.e. = {pct(bound)}; coverage at least "
            f"{pct(1 - bound)}.",
            "**No phase effect** (rejection rates at alpha = 5%; interval coverage of the true gap, zero):",
            table(
                [
                    "scenario",
                    "gap test",
                    "homogeneity",
                    "period found",
                    "gap CI covers 0",
                    "flip 95% CI above 0 (nominal 2.5%)",
                    f"gap test, drift ignored ({max(n // 4, 200)} sweeps)",
                ],
                null_rows,
            ),
            "**Planted phase effects** (power at alpha = 5%, coverage of the planted gap):",
            table(["planted effect", "gap test", "period found", "gap CI covers truth"], power_rows),
            "**Same-window contrast at equal value phase** (`--kv-gaps 0,1`, 30 contents x 1-3 records):",
            table(["scenario", "same-window test rejects", "interval covers truth"], window_rows),
            "**Why the trend is flexible**: spurious gap (pp) a noise-free 15 pp bump 3-6 offsets wide leaves "
            "in the step-4 phase effects after a trend polynomial of each degree (2000 random bumps):",
            table(["trend degree", "median spurious gap", "90th percentile"], leakage()),
        ]
    )
    print(text)
    if args.write:
        replace_block(DOCS, "calibration", text)
        print(f"written to {DOCS}")


if __name__ == "__main__":
    main()
