"""The ``phasescope`` command line. Commands import their heavy dependencies lazily."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(
    help="phasescope: find and measure phase sensitivity in models with chunked KV-cache compression.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()


def fail(message: str) -> None:
    """Print a user-facing error and exit with status 2 (no traceback)."""
    console.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code=2)


def describe(cfg, short: bool = False) -> str:
    """One-line parameter summary of a CompressionConfig (``short``: geometry and pooler only)."""
    if cfg.kind == "full":
        text = "full causal"
    elif cfg.kind == "sliding":
        text = f"sliding L={cfg.local}"
    elif short:
        text = f"s={cfg.step} w={cfg.window} L={cfg.local} {cfg.pooler}" + (" stagger" if cfg.stagger else "")
    else:
        text = (
            f"s={cfg.step} w={cfg.window} a={cfg.align} L={cfg.local} {cfg.visibility} "
            f"rope={cfg.rope} pooler={cfg.pooler}" + (" stagger" if cfg.stagger else "")
        )
    return text + (" sink" if cfg.sink else "")


@app.command()
def schemes() -> None:
    """List the named compression schemes and the registered poolers with their parameters."""
    from phasescope.kv import POOLERS, SCHEMES

    table = Table(title="compression schemes (in Python: phasescope.kv.scheme(name, **overrides))")
    table.add_column("name", no_wrap=True)
    table.add_column("parameters", overflow="fold")
    table.add_column("what it is", overflow="fold")
    for name, (cfg, about) in SCHEMES.items():
        table.add_row(name, describe(cfg), about)
    console.print(table)
    poolers = Table(title="poolers (how a window becomes one entry)")
    poolers.add_column("pooler")
    poolers.add_column("what it does", overflow="fold")
    for name, cls in POOLERS.items():
        poolers.add_row(name, cls.summary)
    console.print(poolers)


@app.command()
def savings(
    scheme: str = typer.Option(
        "v4-csa", help="Named compression scheme used in every layer (see `schemes`)."
    ),
    preset: str = typer.Option("qwen3-0.6b", help="Model preset: qwen3-0.6b, small or tiny."),
    tokens: int = typer.Option(131072, min=1, help="Context length in tokens."),
    local: int = typer.Option(None, min=0, help="Override the scheme's raw local window L."),
    vocab_size: int = typer.Option(151936, min=2, help="Vocabulary size (does not change the cache)."),
    bytes_per_value: int = typer.Option(2, min=1, help="Bytes per cached number (2 = bf16, 4 = fp32)."),
) -> None:
    """KV-cache size of a compressed model vs the same model with full attention (formula)."""
    from phasescope.kv import scheme as get_scheme
    from phasescope.model import preset as get_preset
    from phasescope.model import savings as compute

    try:
        overrides = {} if local is None else {"local": local}
        cfg = get_preset(preset, vocab_size, get_scheme(scheme, **overrides))
    except ValueError as err:
        fail(str(err))
    console.print(
        f"{preset} with {scheme} in all {cfg.n_layers} layers: {compute(cfg, tokens, bytes_per_value)}"
    )


@app.command()
def demo(
    tokens: int = typer.Option(2048, min=16, help="Prompt length for the cache measurement."),
) -> None:
    """End-to-end check of the engine: build a tiny compressed model and its full-attention
    control, prefill a prompt, decode, and print the measured KV-cache savings."""
    from phasescope.engine_demo import run_engine_demo

    run_engine_demo(tokens, console)


@app.command()
def recipes() -> None:
    """List the training recipes, one line each."""
    from phasescope.train.recipes import RECIPES

    table = Table(title="training recipes (phasescope train RECIPE)")
    table.add_column("recipe", no_wrap=True)
    table.add_column("scheme", overflow="fold")
    table.add_column("steps", justify="right")
    table.add_column("token-shift")
    table.add_column("what it is", overflow="fold")
    for name, make in RECIPES.items():
        cfg = make()
        table.add_row(
            name,
            describe(cfg.scheme, short=True),
            str(cfg.steps),
            "on" if cfg.model.token_shift else "off",
            cfg.about,
        )
    console.print(table)


@app.command()
def train(
    recipe: str = typer.Argument(..., help="Recipe name (see `phasescope recipes`)."),
    set_: list[str] | None = typer.Option(
        None,
        "--set",
        help="Override a recipe field: key=value; keys: steps, lr, seed, model.X, scheme.X, task.X.",
    ),
    out: str = typer.Option(None, help="Run directory (default: runs/RECIPE-seedN)."),
    resume: bool = typer.Option(False, help="Continue the run in --out from its latest checkpoint."),
    progress: bool = typer.Option(True, help="Show a progress bar."),
    stop_after: int = typer.Option(
        None, min=1, help="Checkpoint and stop after this many steps in total (continue with --resume)."
    ),
    estimate: bool = typer.Option(
        False, help="Do not train: build the model, run one probe step, print time and memory it would need."
    ),
) -> None:
    """Train a model from scratch on the key-value retrieval task; checkpoints are resumable."""
    from pathlib import Path

    from phasescope.train.checkpoint import CheckpointError
    from phasescope.train.config import apply_overrides
    from phasescope.train.recipes import get_recipe
    from phasescope.train.trainer import train as run_training

    try:
        cfg = apply_overrides(get_recipe(recipe), set_ or [])
    except ValueError as err:
        fail(str(err))
    if estimate:
        print_estimate(cfg)
        return
    run_dir = Path(out) if out else Path("runs") / f"{cfg.name}-seed{cfg.seed}"
    try:
        result = run_training(cfg, run_dir, resume=resume, progress=progress, stop_at=stop_after)
    except CheckpointError as err:
        fail(str(err))
    phases = "  ".join(f"{p}:{a:.0%}" for p, a in enumerate(result["eval_accuracy_by_phase"]))
    console.print(
        f"{cfg.name}: held-out retrieval accuracy {result['eval_accuracy']:.1%} "
        f"(loss {result['eval_loss']:.3f}); by phase mod {result['phase_step']}: {phases}\n"
        f"run directory: {run_dir}"
    )


def print_estimate(cfg) -> None:
    from phasescope.train.estimate import estimate

    with console.status(f"building {cfg.name} and running one probe step"):
        e = estimate(cfg)
    console.print(
        f"{cfg.name}: {e['params'] / 1e6:.1f}M parameters; one probe step ({e['probe_tokens']} tokens) took "
        f"{e['probe_step_s']:.1f} s here (loss {e['loss']:.2f}).\n"
        f"A full step ({cfg.batch_size} x {cfg.task.seq_len} tokens) would take >= {e['step_s_here']:.0f} s "
        "here, "
        f"{cfg.steps} steps >= {e['total_hours_here']:.0f} h.\n"
        f"Memory: {e['weights_grads_adam_gib']:.1f} GiB weights+grads+AdamW, ~{e['activations_gib']:.1f} GiB "
        f"activations per step (fp32, no checkpointing).\n"
        f"Compute: {e['total_pflop']:.0f} PFLOP, about {e['hours_on_one_h100']:.1f} h on one H100 "
        "at 40% of bf16 peak."
    )


def main() -> None:
    app()


if __name__ == "__main__":
    main()
