"""Cost and effect of the test-time phase ensemble (sweep --phase-ensemble) on the shipped tiny-s4
and transformers' DeepSeek-V4 tiny: the same sweep with and without it, in the same run.

Run:  .venv/bin/python benchmarks/phase_ensemble.py [--samples N]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

import phasescope
from phasescope.demo import ASSETS

MODELS = {"tiny-s4": str(ASSETS / "tiny-s4"), "deepseek-v4-tiny": f"hf:{ASSETS / 'deepseek-v4-tiny'}"}


def timed_sweep(spec: str, samples: int, ensemble: bool, root: Path) -> tuple[float, dict]:
    out = root / ("ensemble" if ensemble else "plain")
    start = time.perf_counter()
    phasescope.sweep(spec, step=4, samples=samples, out=out, phase_ensemble=ensemble)
    seconds = time.perf_counter() - start
    return seconds, phasescope.analyze(out, n_resamples=1000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=128)
    parser.add_argument("--quick", action="store_true", help="a smoke run, smallest sizes")
    args = parser.parse_args()
    models = dict(list(MODELS.items())[:1]) if args.quick else MODELS
    if args.quick:
        args.samples = 4
    torch.set_num_threads(2)
    for name, spec in models.items():
        with tempfile.TemporaryDirectory() as tmp:
            plain_s, plain = timed_sweep(spec, args.samples, False, Path(tmp))
            ens_s, ens = timed_sweep(spec, args.samples, True, Path(tmp))
        for label, seconds, m in (("plain", plain_s, plain), ("phase ensemble", ens_s, ens)):
            print(f"{name} {label}: accuracy {m.overall_accuracy:.3f}, {m.verdict.sentence}, {seconds:.1f} s")
        ratio = ens_s / plain_s
        print(f"{name}: the ensemble costs {ratio:.1f}x the plain sweep's time ({args.samples} contents x 24)")


if __name__ == "__main__":
    main()
