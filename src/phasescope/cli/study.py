"""Commands of the study: reproduce, theory, preferences, ablate."""

from __future__ import annotations

from pathlib import Path

import typer

from phasescope.cli.app import command, console, say_path, with_options
from phasescope.cli.results import report_hint
from phasescope.cli.sweep import declared_options_not_in, given_on_command_line
from phasescope.errors import InputError
from phasescope.rundir import PREFERENCES, PREFERENCES_FIGURE, THEORY, RunDir
from phasescope.rundir.files import write_section
from phasescope.rundir.owner import claim_out


@command()
def reproduce(
    out: str = typer.Option("runs/reproduce", help="Directory for RESULTS.md, results.csv, figures and run dirs."),
    retrain: bool = typer.Option(
        False,
        "--retrain",
        metavar="",
        help="Train the whole matrix first into OUT/models (resumable; see docs/reproduction.md for time).",
    ),
    jobs: int = typer.Option(1, min=1, help="--retrain: training processes at a time (one thread each)."),
    seeds: int = typer.Option(
        3,
        min=1,
        max=100,
        help="Seeds 0..K-1 of every recipe (at 3: every shipped seed of the recipes amendment 5 gave more, and "
        "amendment 7's held-out seeds 12 and 13 for its sweeps alone; at most 100: each seed is a trained model per "
        "recipe).",
    ),
    samples: int = typer.Option(
        256, min=8, max=100_000, help="Contents per sweep, each at offsets 0..23 (at most 100,000)."
    ),
    checkpoints: str = typer.Option(
        None, help="Directory of RECIPE-sSEED checkpoints (default: the shipped ones, or OUT/models with --retrain)."
    ),
) -> None:
    """Reproduce the study's from-scratch claims: sweep and analyze every (recipe, seed) of the matrix
    and write one verdict per claim, the mitigation table and every model's row (docs/reproduction.md)."""

    from phasescope.reproduce import run_reproduce

    result = run_reproduce(
        claim_out(out, "phasescope reproduce", may_hold=("reproduction",)),
        retrain=retrain,
        jobs=jobs,
        seeds=seeds,
        samples=samples,
        checkpoints=Path(checkpoints) if checkpoints else None,
        console=console,
    )
    for name, v in result["verdicts"].items():
        console.print(f"{name}: [bold]{v['verdict']}[/] — {v['claim']}")
    say_path(f"wrote {out}/RESULTS.md, {out}/results.csv")


def _setting_status(status, starts: int, began: float):
    """run_theory's ``on_setting``: the status line names the setting being integrated."""
    import time

    def show(k, cfg) -> None:
        status.update(
            f"integrating setting {k} (s={cfg.step} d={cfg.capacity:g} noise={cfg.noise:g} L={cfg.local} "
            f"readout {cfg.readout}), {starts} starts, {time.perf_counter() - began:.0f} s so far"
        )

    return show


def _check_finite(**values: float) -> None:
    import math

    for name, value in values.items():
        if not math.isfinite(value) or value > 1e6:
            raise InputError(
                f"--{name} {value} is invalid; allowed: a finite number up to 1e6 (beyond it the flow's numbers "
                "overflow)"
            )


@command()
def theory(
    step: int = typer.Option(
        4, min=1, max=32, help="Compression step s of the main run (the by-step table is s=2,4,6,8); at most 32."
    ),
    starts: int = typer.Option(
        32,
        min=1,
        help="Random near-uniform initialisations per setting (memory grows with (starts x step)^2; time faster than "
        "starts: 32 take ~20 s, 128 ~2 min on 2 cores).",
    ),
    seed: int = typer.Option(0, min=0, max=2**32 - 1, help="Seed of the initialisations."),
    capacity: float = typer.Option(16.0, min=0.01, help="Entry dimension d (tiny models: head dim 16; at most 1e6)."),
    noise: float = typer.Option(0.25, min=0.0, help="Noise variance in the entry, per unit token norm (at most 1e6)."),
    out: str = typer.Option(
        None,
        help="Directory for theory.json and theory_*.png figures (default: print only); a sweep run dir puts "
        "them in its report.html (phasescope report RUN).",
    ),
) -> None:
    """Gradient-flow model of training a compressor (docs/theory.md): when pooling breaks symmetry."""
    import time

    claim_out(out, "phasescope theory", may_hold=("sweep",))  # before the flow: a bad --out fails at once
    _check_finite(noise=noise, capacity=capacity)

    from phasescope.limits import refuse_beyond_memory
    from phasescope.theory import run_theory

    def solver_bytes(n: int) -> float:  # LSODA holds dense Jacobians of 2 x starts x s unknowns, s up to 8
        return 3 * 8 * (2 * n * max(step, 8)) ** 2

    refuse_beyond_memory("--starts", starts, solver_bytes, "the flow of all starts is solved jointly")

    began = time.perf_counter()
    with console.status("integrating the gradient flow") as status:
        result = run_theory(step, starts, seed, capacity, noise, on_setting=_setting_status(status, starts, began))
    main = result["main"]
    console.print(
        f"s={step} d={capacity:g} noise={noise:g}: broke symmetry in {main['broken_fraction']:.0%} of {starts} "
        f"starts; favourite offset counts {main['top_offset_counts']}; gap {main['gap_pp_mean']:.1f} pp; "
        f"sorted quality {main['quality_sorted_mean']}; curvature at uniform {main['curvature_at_uniform']:.3g}, "
        f"critical capacity d* {main['critical_capacity'] or float('nan'):.1f}"
    )
    for row in result["by_step"]:
        console.print(
            f"  s={row['step']}: gap {row['gap_pp_mean']:.1f} pp, broken {row['broken_fraction']:.0%}, "
            f"strong offsets {row['strong_offsets_mean']:.2f}"
        )
    if out:
        from phasescope.theory.figures import write_figures

        write_section(out, THEORY, result)
        write_figures(result, Path(out))
        say_path(f"wrote {out}/theory.json and {out}/theory_*.png")
        report_hint(out)
    console.print(f"{time.perf_counter() - began:.1f} s")


PREFERENCES_OPTIONS = {  # parameter: (type, typer option)
    "model": (
        str,
        typer.Option(
            ...,
            "--model",
            help="A phasescope model directory (written by `phasescope train`), a shipped one by name "
            "(demo:tiny-s4), or hf:DIR: a transformers DeepseekV4ForCausalLM export with phasescope.json (its task).",
        ),
    ),
    "out": (
        str,
        typer.Option(
            None,
            help="Directory for preferences.json and preferences.png (default: print only); a sweep run dir puts "
            "them in its report.html (phasescope report RUN).",
        ),
    ),
    "run": (
        str,
        typer.Option(
            None, "--run", help="A sweep run directory: compare its per-phase accuracy (analyzed first if needed)."
        ),
    ),
    "rows": (int, typer.Option(64, min=1, help="Rows of the model's own task to run.")),
    "seed": (int, typer.Option(0, min=0, max=2**32 - 1, help="Seed of the task rows and the bootstrap.")),
}
PREFERENCES_OPTIONS |= declared_options_not_in(PREFERENCES_OPTIONS, probes=False)  # the model's, as sweep's


@command()
@with_options(PREFERENCES_OPTIONS)
def preferences(ctx, model: str, out: str | None, run: str | None, rows: int, seed: int, **loading) -> None:
    """Learned position preferences: pooling weight per window slot, layer and KV head (docs/preferences.md)."""
    claim_out(out, "phasescope preferences", may_hold=("sweep",))
    from phasescope.shipped import expand

    model = expand(model)  # demo:NAME

    from phasescope.inspect.preferences import (
        compare_with_run,
        format_table,
        load_for_preferences,
        model_preferences,
        task_rows,
    )
    from phasescope.results import check_sweep_run_dir

    if run and not RunDir(run).metrics.is_file():
        check_sweep_run_dir(Path(run))  # before the model runs: a wrong --run fails fast, naming the cause
    _refuse_rows_beyond_memory(model, rows)
    from phasescope.run.settings import model_options

    options = model_options(model, loading, given_on_command_line(ctx, loading))
    prefs = model_preferences(load_for_preferences(model, options), task_rows(model, rows, seed), seed=seed)
    if not prefs["layers"]:
        raise InputError(f"{model} has no compressed layer: no position preferences to report")
    console.print(
        f"effective weight per window slot (mean ± std over {rows} task rows; slot 0 = oldest token)", soft_wrap=True
    )
    for line in format_table(prefs):
        console.print(line, highlight=False, soft_wrap=True)
    comparison = None
    if run:
        comparison = compare_with_run(prefs, *_run_phase_accuracy(run))
        prefs["run_comparison"] = comparison
        rho = "not estimable" if comparison["rho"] is None else f"{comparison['rho']:.2f}"
        console.print(
            f"Spearman rho (mean weight per phase vs accuracy per phase): {rho}; {comparison['note']}", soft_wrap=True
        )
    if out:
        from phasescope.inspect.preferences import write_figure

        write_section(out, PREFERENCES, prefs)
        write_figure(prefs, Path(out) / PREFERENCES_FIGURE, comparison)
        say_path(f"wrote {out}/preferences.json and {out}/preferences.png")
        report_hint(out)


def _refuse_rows_beyond_memory(model: str, rows: int) -> None:
    """preferences --rows: per row its tokens, and the bootstrap's 1000 resamples of its slot
    weights (window <= 16)."""
    from phasescope.inspect.preferences import model_task
    from phasescope.limits import refuse_beyond_memory

    seq_len = model_task(model).seq_len
    refuse_beyond_memory("--rows", rows, lambda n: n * (8 * seq_len + 8 * 1000 * 17))


def _run_phase_accuracy(run: str) -> tuple[list, int]:
    """(accuracy per phase, step) of a sweep run: analyzed first when metrics.json is missing or
    stale; a metrics.json without its records (copied from elsewhere) is read as it is."""
    from phasescope.results import current_metrics
    from phasescope.rundir.metrics import phase_accuracy_file

    if RunDir(run).records.exists():
        metrics = current_metrics(run)
        return metrics.phase_accuracy(), metrics.step
    return phase_accuracy_file(RunDir(run).metrics)
