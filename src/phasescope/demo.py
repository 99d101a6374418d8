"""``phasescope demo``: sweep, analyze and report three tiny models shipped with the package —
a step-4 compressed phasescope model, its full-attention control, and transformers' own
``DeepseekV4ForCausalLM`` (the real architecture, loaded through ``hf:``) — and print them side
by side through ``phasescope compare``.

The shipped models were trained by ``phasescope train`` (command and seed in each
``manifest.json``); ``--retrain`` trains them again from scratch first.
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from phasescope.reporting.text import dependence_short
from phasescope.rundir import RunDir
from phasescope.rundir.files import read_json
from phasescope.train.shipped import SHIPPED_MANIFEST

ASSETS = Path(__file__).parent / "assets" / "demo"
MODELS = {
    "tiny-s4": "step-4 compressed (s=w=4, scalar gate, L=8)",
    "tiny-full": "full-attention control",
    "deepseek-v4-tiny": "transformers DeepseekV4ForCausalLM (CSA s=4, w=8, channel gate)",
}
HF_MODELS = {"deepseek-v4-tiny"}  # transformers directories, swept as hf:DIR
DEMO_SAMPLES = 256
# pad-prefix moves everything but the phase identically, so one content sample differs across
# offsets only in how it sits against the compression windows.
DEMO_DESIGN = "shift-needle"


def model_specs(out: Path, retrain: bool, console: Console) -> dict[str, str]:
    """Model spec per demo model: the shipped directory, or the one trained again (``--retrain``;
    transformers models land in OUT/hf)."""
    if retrain:
        trained = retrain_models(out / "models", console)
        dirs = {name: trained[name] / "hf" if name in HF_MODELS else trained[name] for name in MODELS}
    else:
        dirs = {name: ASSETS / name for name in MODELS}
    return {name: f"hf:{path}" if name in HF_MODELS else str(path) for name, path in dirs.items()}


def retrain_models(root: Path, console: Console) -> dict[str, Path]:
    """Train the models from scratch with the shipped commands, in parallel (one thread each)."""
    import subprocess
    import sys

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from phasescope.train.config import apply_overrides
    from phasescope.train.recipes import get_recipe

    jobs, steps = {}, {}
    for name in MODELS:
        manifest = read_json(ASSETS / name / SHIPPED_MANIFEST, "demo model manifest")
        steps[name] = apply_overrides(get_recipe(manifest["recipe"]), manifest["set"]).steps
        target = root / name
        args = ["train", manifest["recipe"], *sum((["--set", s] for s in manifest["set"]), []), "--out", str(target)]
        args += ["--no-progress"] + (["--resume"] if (target / "checkpoints" / "LATEST").exists() else [])
        console.print("retraining: phasescope " + " ".join(args))
        target.mkdir(parents=True, exist_ok=True)
        log = (target / "train_stdout.txt").open("w")
        jobs[name] = (subprocess.Popen([sys.executable, "-m", "phasescope", *args], stdout=log, stderr=log), target)
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    ) as progress:
        tasks = {name: progress.add_task(f"train {name}", total=steps[name]) for name in jobs}
        while any(proc.poll() is None for proc, _ in jobs.values()):
            for name, (_, target) in jobs.items():
                log = target / "log.jsonl"
                progress.update(tasks[name], completed=len(log.read_text().splitlines()) if log.exists() else 0)
            time.sleep(2)
    for name, (proc, target) in jobs.items():
        if proc.returncode != 0:
            raise RuntimeError(f"retraining {name} failed; see {target / 'train_stdout.txt'}")
    return {name: target for name, (_, target) in jobs.items()}


def run_demo(out: Path, retrain: bool, samples: int, console: Console) -> dict[str, dict]:
    import phasescope
    from phasescope.api import compared_runs
    from phasescope.reporting.compare import rich_table, write_compare

    start = time.perf_counter()
    metrics = {}
    for name, spec in model_specs(out, retrain, console).items():
        run_dir = out / name
        console.print(f"sweeping {name}: {MODELS[name]}")
        phasescope.sweep(
            spec,
            step=4,
            samples=samples,
            design=DEMO_DESIGN,
            out=run_dir,
            progress=True,
            command=f"phasescope sweep --model {spec} --step 4 --samples {samples} --design {DEMO_DESIGN} "
            f"--out {run_dir}",
        )
        metrics[name] = phasescope.analyze(run_dir)
        phasescope.report(run_dir)
    compared = compared_runs([out / name for name in MODELS], list(MODELS))
    page = write_compare(compared, out / "compare")
    console.print(rich_table(compared))
    for name, m in metrics.items():
        console.print(summary(name, m, RunDir(out / name).report), highlight=False)
    console.print(f"side by side: {page}")
    console.print(f"demo finished in {time.perf_counter() - start:.0f} s")
    return metrics


def summary(name: str, m: dict, report: Path) -> str:
    """The verdict per model, its phase dependence and its report (the full wording is in
    `phasescope analyze` and the report)."""
    pad = "  "  # under the verdict, left-aligned: indented by the name's width it read as centred text
    lines = [f"[bold]{name}[/]: {m.verdict.sentence}"]
    if dependence := dependence_short(m):
        lines.append(pad + dependence.removeprefix("; "))
    return "\n".join(lines + [f"{pad}report: {report}"])
