"""False-positive rates of the log-prob margin statistics (analysis/log_score.py) at the ceiling:
every answer right, margins = skewed content levels + a logistic drift over offsets + t(4)
noise, no phase effect. Prints, per scenario, how often the margin gap test (p < 0.05) and the
period test reject over 200 simulated sweeps (199 bootstrap draws each), and how often the gap's
p-value is withheld. Results in docs/sweeps.md ("At the ceiling: the log-prob margin").

    OMP_NUM_THREADS=1 .venv/bin/python experiments/margin_calibration.py      # about 2 min
"""

import numpy as np

from phasescope.analysis.log_score import log_score
from phasescope.analysis.simulate import simulate_ceiling_margins

SCENARIOS = [  # contents, drift (nats), records per (content, offset)
    (40, 3.0, 1),
    (12, 3.0, 1),
    (40, 0.0, 3),
    (200, 6.0, 2),
]


def main(n: int = 200) -> None:
    print("contents  drift nats  records  gap rejects  period detected  gap withheld")
    for contents, drift, records in SCENARIOS:
        rng = np.random.default_rng(5)
        gap = period = withheld = 0
        for i in range(n):
            r = simulate_ceiling_margins(rng, n_contents=contents, drift=drift, records=records)
            s = log_score(r, np.random.default_rng(i), 199)
            gap += s["gap_p_value"] is not None and s["gap_p_value"] < 0.05
            period += bool(s["period"].get("detected"))
            withheld += s["gap_p_value"] is None
        print(f"{contents:8d}  {drift:10.1f}  {records:7d}  {gap / n:11.3f}  {period / n:15.3f}  {withheld / n:12.3f}")


if __name__ == "__main__":
    main()
