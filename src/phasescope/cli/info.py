"""Commands that describe what phasescope has: schemes, savings, the demos, backends, recipes."""

from __future__ import annotations

import typer
from rich.table import Table

from phasescope.cli.app import command, console


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
            f"rope={cfg.rope} pooler={cfg.pooler}"
            + (" value_rope" if cfg.value_rope else "")
            + (" stagger" if cfg.stagger else "")
        )
    return text + (" sink" if cfg.sink else "")


@command()
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


@command()
def savings(
    scheme: str = typer.Option("v4-csa", help="Named compression scheme used in every layer (see `schemes`)."),
    preset: str = typer.Option("qwen3-0.6b", help="Model preset: qwen3-0.6b, small or tiny."),
    tokens: int = typer.Option(131072, min=1, max=2**40, help="Context length in tokens (up to 2^40)."),
    local: int = typer.Option(None, min=0, help="Override the scheme's raw local window L."),
    vocab_size: int = typer.Option(151936, min=2, help="Vocabulary size (does not change the cache)."),
    bytes_per_value: int = typer.Option(
        2, min=1, max=8, help="Bytes per cached number (1 = fp8, 2 = bf16, 4 = fp32, 8 = fp64; at most 8)."
    ),
) -> None:
    """KV-cache size of a compressed model vs the same model with full attention (formula)."""
    from phasescope.kv import scheme as get_scheme
    from phasescope.model import preset as get_preset
    from phasescope.model import savings as compute

    overrides = {} if local is None else {"local": local}
    cfg = get_preset(preset, vocab_size, get_scheme(scheme, **overrides))
    console.print(f"{preset} with {scheme} in all {cfg.n_layers} layers: {compute(cfg, tokens, bytes_per_value)}")


@command()
def demo(
    out: str = typer.Option("runs/demo", help="Where the run directories, reports and compare.html go."),
    retrain: bool = typer.Option(
        False,
        "--retrain",
        metavar="",
        help="Retrain the three models from scratch first (about 15 minutes on 2 cores, in parallel).",
    ),
    samples: int = typer.Option(256, min=8, help="Content samples per model (each at 24 offsets)."),
) -> None:
    """The main job: sweep, analyze and report three tiny models shipped with phasescope (a step-4
    compressed model, its full-attention control, transformers' DeepSeek-V4) and print them side
    by side through `phasescope compare`."""

    from phasescope.demo import run_demo
    from phasescope.rundir.owner import claim_out

    run_demo(claim_out(out, "phasescope demo"), retrain, samples, console)


@command("cache-demo")
def cache_demo(
    tokens: int = typer.Option(2048, min=16, help="Prompt length for the cache measurement."),
) -> None:
    """Engine check: build tiny compressed models and a full-attention control, prefill a
    prompt, decode, and print the measured KV-cache savings."""
    from phasescope.engine_demo import run_engine_demo
    from phasescope.limits import refuse_beyond_memory

    # measured: ~280 MiB at any length plus ~4 KiB per prompt token (two for headroom)
    refuse_beyond_memory("--tokens", tokens, lambda n: 300 * 2**20 + 8192 * n)
    run_engine_demo(tokens, console)


@command()
def backends() -> None:
    """List the model backends: which model spec each one loads, with an example."""
    from phasescope.backends import BACKENDS, kind

    table = Table(title="model backends (phasescope sweep --model SPEC)")
    table.add_column("backend", no_wrap=True)
    table.add_column("spec", no_wrap=True)
    table.add_column("what it loads", overflow="fold")
    for name in BACKENDS:
        module = kind(name)
        table.add_row(name, module.EXAMPLE, module.SUMMARY)
    table.add_row(
        "python", "phasescope.sweep(obj)", "a Decoder, a transformers PreTrainedModel or any input_ids -> logits"
    )
    from phasescope.shipped import PREFIX, shipped_names

    names = ", ".join(PREFIX + n for n in shipped_names())
    table.add_row("(shipped)", f"{PREFIX}tiny-s4", f"a model phasescope ships, from any directory: {names}")
    console.print(table)


@command()
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
