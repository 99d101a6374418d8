"""The shipped demo models under each sweep design, and the same-window contrast.

    .venv/bin/python experiments/demo_designs.py [--samples 256] [--write]

Sweeps the three models of `phasescope demo` (src/phasescope/assets/demo) with shift-needle,
pad-prefix and shift-needle with `--kv-gaps 0,1`, analyzes each run and prints one row per
run: drift-adjusted gap with its interval and p-value, raw max - min, detected period, and
the per-content phase dependence and the same-window contrast at equal value phase. ``--write`` puts the table into
docs/sweeps.md. About 5 minutes on one core.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _markdown import replace_block, table

import phasescope
from phasescope.demo import HF_MODELS, MODELS, model_specs
from phasescope.reporting.text import interval

DOCS = Path(__file__).resolve().parents[1] / "docs" / "sweeps.md"
RUNS = {
    "shift-needle": dict(design="shift-needle"),
    "pad-prefix": dict(design="pad-prefix"),
    "shift-needle, --kv-gaps 0,1": dict(design="shift-needle", kv_gaps=(0, 1)),
}


def row(model: str, run: str, m) -> list[str]:
    period = m.period
    windows = m.windows
    if windows.get("separable"):
        same = f"{windows['same_minus_split_pp']:+.1f} pp{interval(windows.get('ci_pp'))}"
        same += f" (p = {windows['p_value']:.2g})" if windows.get("p_value") is not None else ""
    else:
        same = "not separable (one rendering)" if windows else "-"
    gap = "-" if m.gap_pp is None else f"{m.gap_pp:.1f}{interval(m.gap_ci_pp)}"
    p_gap = "-" if m.gap_p_value is None else f"{m.gap_p_value:.2g}"
    found = f"{period.detected} (p = {period.p_value:.2g})" if period.detected else "none"
    dep = m.phase_dependence or {}
    flip = "-" if dep.get("rms_pp") is None else f"{dep['rms_pp']:.1f}{interval(dep.get('ci_pp'))}"
    return [model, run, f"{m.overall_accuracy:.3f}", gap, p_gap, f"{m.gap_raw_pp:.1f}", found, flip, same]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        specs = model_specs(Path(tmp), retrain=False, console=None)
        for model in MODELS:
            geometry = {} if model in HF_MODELS else {"step": 4}  # a transformers config states its own
            for run, kwargs in RUNS.items():
                out = Path(tmp) / f"{model}-{len(rows)}"
                phasescope.sweep(specs[model], samples=args.samples, out=out, **geometry, **kwargs)
                rows.append(row(model, run, phasescope.analyze(out)))
                print(" | ".join(rows[-1]), flush=True)
    text = (
        f"Command: `.venv/bin/python experiments/demo_designs.py --samples {args.samples} --write` "
        f"({args.samples} contents x 24 offsets per run; the `--kv-gaps` runs score each content twice).\n\n"
        + table(
            [
                "model",
                "sweep",
                "accuracy",
                "gap pp (adjusted) [95%]",
                "gap p",
                "raw max-min pp",
                "period",
                "phase dependence per content pp [95%]",
                "same-window minus split at equal value phase",
            ],
            rows,
        )
    )
    print(text)
    if args.write:
        replace_block(DOCS, "demo-designs", text)


if __name__ == "__main__":
    main()
