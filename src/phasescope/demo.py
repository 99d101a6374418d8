"""``phasescope demo``: sweep, analyze and report two tiny models shipped with the package
(a step-4 compressed model and its full-attention control), side by side.

The shipped models were trained by ``phasescope train`` (command and seed in each
``manifest.json``); ``--retrain`` trains both again from scratch first.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ASSETS = Path(__file__).parent / "assets" / "demo"
MODELS = {"tiny-s4": "step-4 compressed (s=w=4, scalar gate, L=8)", "tiny-full": "full-attention control"}
DEMO_SAMPLES = 256
# pad-prefix moves everything but the phase identically, so one content sample differs across
# offsets only in how it sits against the compression windows.
DEMO_DESIGN = "shift-needle"


def model_dirs(out: Path, retrain: bool, console: Console) -> dict[str, Path]:
    if not retrain:
        return {name: ASSETS / name for name in MODELS}
    from phasescope.train.config import apply_overrides
    from phasescope.train.recipes import get_recipe
    from phasescope.train.trainer import train

    dirs = {}
    for name in MODELS:
        manifest = json.loads((ASSETS / name / "manifest.json").read_text())
        cfg = apply_overrides(get_recipe(manifest["recipe"]), manifest["set"])
        target = out / "models" / name
        console.print(
            f"retraining {name}: phasescope train {manifest['recipe']} "
            + " ".join(f"--set {s}" for s in manifest["set"])
        )
        train(cfg, target, resume=(target / "checkpoints" / "LATEST").exists(), progress=True)
        dirs[name] = target
    return dirs


def run_demo(out: Path, retrain: bool, samples: int, console: Console) -> dict[str, dict]:
    import phasescope

    start = time.perf_counter()
    metrics = {}
    for name, model_dir in model_dirs(out, retrain, console).items():
        run_dir = out / name
        console.print(f"sweeping {name} ({MODELS[name]}) -> {run_dir}")
        phasescope.sweep(
            model_dir,
            step=4,
            samples=samples,
            design=DEMO_DESIGN,
            out=run_dir,
            progress=True,
            command=f"phasescope sweep --model {model_dir} --step 4 --samples {samples} --design {DEMO_DESIGN} "
            f"--out {run_dir}",
        )
        metrics[name] = phasescope.analyze(run_dir)
        phasescope.report(run_dir)
    console.print(side_by_side(metrics))
    for name, m in metrics.items():
        period = m["period"]["detected"]
        console.print(
            f"[bold]{name}[/]: gap {m['gap_pp']:.1f} pp [{m['gap_ci_pp'][0]:.1f}, {m['gap_ci_pp'][1]:.1f}] "
            f"(p = {m['gap_p_value']:.2g}); "
            + (f"detected period {period} (p = {m['period']['p_value']:.2g})" if period else "no significant period")
            + f"; report: {out / name / 'report.html'}"
        )
    console.print(f"demo finished in {time.perf_counter() - start:.0f} s")
    return metrics


def side_by_side(metrics: dict[str, dict]) -> Table:
    table = Table(title="retrieval accuracy by phase of the needle's value (mod 4); Wilson 95% CI")
    table.add_column("phase", justify="right")
    for name in metrics:
        table.add_column(name, justify="right")
    for p in range(4):
        cells = []
        for m in metrics.values():
            row = m["phases"][p] if p < len(m["phases"]) else None
            cells.append("-" if row is None else f"{row['accuracy']:.2f} [{row['ci_low']:.2f}, {row['ci_high']:.2f}]")
        table.add_row(f"{p}{' (boundary)' if p == 3 else ''}", *cells)
    return table
