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


def describe(cfg) -> str:
    """One-line parameter summary of a CompressionConfig."""
    if cfg.kind == "full":
        text = "full causal"
    elif cfg.kind == "sliding":
        text = f"sliding L={cfg.local}"
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


def main() -> None:
    app()


if __name__ == "__main__":
    main()
