"""`phasescope train` (and --estimate)."""

from __future__ import annotations

import functools
from pathlib import Path

import typer

from phasescope.cli.app import command, console, say_path


@command()
def train(
    recipe: str = typer.Argument(..., help="Recipe name (see `phasescope recipes`)."),
    set_: list[str] | None = typer.Option(
        None,
        "--set",
        metavar="KEY=VALUE",
        help="Override a recipe field: key=value; keys: steps, lr, seed, warm_start_steps, init_from (a model "
        "directory or a recipe whose shipped checkpoint starts the run), random_align, model.X, scheme.X, task.X; "
        "transformers DeepSeek-V4 recipes: index_topk, indexer_loss, indexer_dense_steps (docs/training.md).",
    ),
    out: str = typer.Option(None, metavar="DIR", help="Run directory (default: runs/RECIPE-seedN)."),
    resume: bool = typer.Option(
        False, "--resume", metavar="", help="Continue the run in --out from its latest checkpoint."
    ),
    progress: bool = typer.Option(True, metavar="", help="Show a progress bar."),
    stop_after: int = typer.Option(
        None,
        min=1,
        metavar="STEPS",
        help="Checkpoint and stop after this many steps in total (continue with --resume).",
    ),
    estimate: bool = typer.Option(
        False,
        "--estimate",
        metavar="",
        help="Do not train: build the model, run one probe step, print the time and memory training would need.",
    ),
) -> None:
    """Train a model from scratch on the key-value retrieval task; checkpoints are resumable."""

    from phasescope.rundir.owner import claim_out
    from phasescope.train.config import apply_overrides, refuse_repeated
    from phasescope.train.recipes import get_recipe
    from phasescope.train.trainer import train as run_training

    refuse_repeated(set_ or [])
    cfg = apply_overrides(get_recipe(recipe), set_ or [])
    claim_out(out, "phasescope train", may_hold=("model", "training"))  # its own run: --resume, or a finished one
    if estimate:
        print_estimate(cfg)
        return
    run_dir = Path(out) if out else Path("runs") / f"{cfg.name}-seed{cfg.seed}"
    say = functools.partial(console.print, highlight=False)
    result = run_training(cfg, run_dir, resume=resume, progress=progress, stop_at=stop_after, say=say)
    phases = "  ".join(f"{p}:{a:.0%}" for p, a in enumerate(result["eval_accuracy_by_phase"]))
    console.print(
        f"{cfg.name}: held-out retrieval accuracy {result['eval_accuracy']:.1%} "
        f"(loss {result['eval_loss']:.3f}); by phase mod {result['phase_step']}: {phases}"
    )
    say_path(f"run directory: {run_dir}")


def print_estimate(cfg) -> None:
    from phasescope.reporting.text import duration
    from phasescope.train.estimate import estimate

    with console.status(f"building {cfg.name} and timing real training steps"):
        e = estimate(cfg)
    rows = "its whole batch" if e["measured_rows"] == cfg.batch_size else f"{e['measured_rows']} rows, scaled"
    console.print(
        f"{cfg.name}: {e['params'] / 1e6:.2f}M parameters (loss {e['loss']:.2f} at the start).\n"
        f"Measured here ({rows}): one step ({cfg.batch_size} x {cfg.task.seq_len} tokens) takes "
        f"{duration(e['step_s'])}; {cfg.steps} steps with the held-out evaluations take about "
        f"{duration(e['total_s'])}.\n"
        f"Peak memory about {e['peak_memory_gib']:.2f} GiB (process resident set; weights, gradients and AdamW "
        f"{e['weights_grads_adam_gib']:.3f} GiB of it).\n"
        f"Compute: {e['total_flop']:.2g} FLOP, about {duration(e['h100_s'])} on one H100 at 40% of bf16 peak.",
        highlight=False,
    )
