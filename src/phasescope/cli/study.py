"""Commands of the study: reproduce, theory, preferences, ablate."""

from __future__ import annotations

from pathlib import Path

import typer

from phasescope.cli.app import command, console
from phasescope.cli.results import report_hint
from phasescope.cli.sweep import parse_offsets
from phasescope.errors import InputError


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
    seeds: int = typer.Option(3, min=1, help="Seeds 0..K-1 of every recipe."),
    samples: int = typer.Option(256, min=8, help="Contents per sweep, each at offsets 0..23."),
    checkpoints: str = typer.Option(
        None, help="Directory of RECIPE-sSEED checkpoints (default: the shipped ones, or OUT/models with --retrain)."
    ),
) -> None:
    """Reproduce the study's from-scratch claims: sweep and analyze every (recipe, seed) of the matrix
    and write one verdict per claim, the mitigation table and every model's row (docs/reproduction.md)."""

    from phasescope.reproduce import run_reproduce

    result = run_reproduce(
        Path(out),
        retrain=retrain,
        jobs=jobs,
        seeds=seeds,
        samples=samples,
        checkpoints=Path(checkpoints) if checkpoints else None,
        console=console,
    )
    for name, v in result["verdicts"].items():
        console.print(f"{name}: [bold]{v['verdict']}[/] — {v['claim']}")
    console.print(f"wrote {out}/RESULTS.md, {out}/results.csv")


@command()
def theory(
    step: int = typer.Option(4, min=1, help="Compression step s of the main run (the by-step table is s=2,4,6,8)."),
    starts: int = typer.Option(32, min=1, help="Random near-uniform initialisations per setting."),
    seed: int = typer.Option(0, help="Seed of the initialisations."),
    capacity: float = typer.Option(16.0, min=0.01, help="Entry dimension d (tiny models: head dim 16)."),
    noise: float = typer.Option(0.25, min=0.0, help="Noise variance in the entry, per unit token norm."),
    out: str = typer.Option(
        None,
        help="Directory for theory.json and theory_*.png figures (default: print only); a sweep run dir puts "
        "them in its report.html (phasescope report RUN).",
    ),
) -> None:
    """Gradient-flow model of training a compressor (docs/theory.md): when pooling breaks symmetry."""
    import json
    import math
    import time

    for name, value in (("--noise", noise), ("--capacity", capacity)):
        if not math.isfinite(value):
            raise InputError(f"{name} {value} is invalid; allowed: a finite number (the model's numbers would be NaN)")

    from phasescope.theory import run_theory

    began = time.perf_counter()
    result = run_theory(step, starts, seed, capacity=capacity, noise=noise)
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

        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "theory.json").write_text(json.dumps(result, indent=1))
        write_figures(result, Path(out))
        console.print(f"wrote {out}/theory.json and {out}/theory_*.png")
        report_hint(out)
    console.print(f"{time.perf_counter() - began:.1f} s")


@command()
def preferences(
    model: str = typer.Option(
        ...,
        "--model",
        help="A phasescope model directory (written by `phasescope train`), or hf:DIR: a transformers "
        "DeepseekV4ForCausalLM export with phasescope.json (its task).",
    ),
    out: str = typer.Option(
        None,
        help="Directory for preferences.json and preferences.png (default: print only); a sweep run dir puts "
        "them in its report.html (phasescope report RUN).",
    ),
    run: str = typer.Option(None, "--run", help="A sweep run dir with metrics.json: compare per-phase accuracy."),
    rows: int = typer.Option(64, min=1, help="Rows of the model's own task to run."),
    seed: int = typer.Option(0, help="Seed of the task rows and the bootstrap."),
) -> None:
    """Learned position preferences: pooling weight per window slot, layer and KV head (docs/preferences.md)."""
    import json

    from phasescope.inspect.preferences import (
        compare_with_run,
        format_table,
        load_for_preferences,
        model_preferences,
        task_rows,
    )
    from phasescope.runfiles import read_json

    prefs = model_preferences(load_for_preferences(model), task_rows(model, rows, seed), seed=seed)
    if not prefs["layers"]:
        raise InputError(f"{model} has no compressed layer: no position preferences to report")
    console.print(
        f"effective weight per window slot (mean ± std over {rows} task rows; slot 0 = oldest token)", soft_wrap=True
    )
    for line in format_table(prefs):
        console.print(line, highlight=False, soft_wrap=True)
    comparison = None
    if run:
        metrics = read_json(Path(run) / "metrics.json", "metrics", f"run `phasescope analyze {run}` first")
        comparison = compare_with_run(prefs, metrics)
        prefs["run_comparison"] = comparison
        rho = "not estimable" if comparison["rho"] is None else f"{comparison['rho']:.2f}"
        console.print(
            f"Spearman rho (mean weight per phase vs accuracy per phase): {rho}; {comparison['note']}", soft_wrap=True
        )
    if out:
        from phasescope.inspect.preferences import write_figure

        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "preferences.json").write_text(json.dumps(prefs, indent=1))
        write_figure(prefs, Path(out) / "preferences.png", comparison)
        console.print(f"wrote {out}/preferences.json and {out}/preferences.png")
        report_hint(out)


@command()
def ablate(
    model: str = typer.Option(
        ...,
        "--model",
        metavar="SPEC",
        rich_help_panel="Model",
        help="Model to ablate: a phasescope model directory or hf:DIR (transformers, DeepSeek-V4 included); the "
        "weights must load here (served openai: models cannot be ablated).",
    ),
    probe: str = typer.Option(
        "kv-retrieval",
        metavar="PROBE",
        rich_help_panel="Probe",
        help="Probe of the paired sweep: kv-retrieval, padding-completion or prompts:FILE.jsonl.",
    ),
    out: str = typer.Option(
        None,
        metavar="DIR",
        rich_help_panel="Ablation",
        help="Directory for ablation.json (default: print only); a sweep run dir puts the section into its report.",
    ),
    mode: str = typer.Option(
        "zero",
        metavar="MODE",
        rich_help_panel="Ablation",
        help="How a head is removed: zero; mean (its mean over every token of the unablated sweep); resample "
        "(its output on another content at the same offset; needs prompts of one length per offset).",
    ),
    layers: str = typer.Option(
        None, metavar="LAYERS", rich_help_panel="Ablation", help="Layers to ablate, e.g. 0,1 (default: all)."
    ),
    component: str = typer.Option(
        "head",
        metavar="WHAT",
        rich_help_panel="Ablation",
        help="What is removed: head (a query head's output) or kv-entries (a KV head's compressed entries).",
    ),
    top_k: int = typer.Option(
        1,
        min=1,
        metavar="K",
        rich_help_panel="Ablation",
        help="Heads per phase removed together in the held-out causal check.",
    ),
    offsets: str = typer.Option(
        "0:8",
        metavar="D",
        rich_help_panel="Geometry",
        help="Offsets d of the paired sweep: start:stop or a comma list (two periods or more).",
    ),
    samples: int = typer.Option(
        20,
        min=1,
        metavar="N",
        rich_help_panel="Probe",
        help="Content samples, each at every offset (half choose, half test).",
    ),
    seed: int = typer.Option(
        0,
        metavar="SEED",
        rich_help_panel="Ablation",
        help="Seed of the contents, the half split and the permutations.",
    ),
    permutations: int = typer.Option(
        300, min=50, metavar="N", rich_help_panel="Ablation", help="Within-content permutations per head."
    ),
    step: int = typer.Option(
        None, min=1, metavar="S", rich_help_panel="Geometry", help="Compression step (default: the model's config)."
    ),
    local: int = typer.Option(
        None, min=0, metavar="L", rich_help_panel="Geometry", help="Raw local window L (default: the model's config)."
    ),
    design: str = typer.Option(
        "shift-needle",
        metavar="DESIGN",
        rich_help_panel="Probe",
        help="Placement: shift-needle (the needle moves, length fixed) or pad-prefix (d filler tokens after BOS).",
    ),
    tokenizer: str = typer.Option(
        None,
        metavar="DIR",
        rich_help_panel="Model",
        help="Tokenizer directory, for text probes on a phasescope model.",
    ),
    dtype: str = typer.Option(
        "float32", metavar="DTYPE", rich_help_panel="Model", help="Weights dtype: float32, bfloat16 or float16."
    ),
    device: str = typer.Option(
        "cpu", metavar="DEVICE", rich_help_panel="Model", help="Torch device for the model: cpu, cuda, mps."
    ),
    trust_remote_code: bool = typer.Option(
        False,
        "--trust-remote-code",
        metavar="",
        rich_help_panel="Model",
        help="hf: run the model directory's own Python code (only if you trust its author).",
    ),
) -> None:
    """Remove each attention head in turn and rerun the same paired sweep: accuracy and log-prob change
    per phase, a specialization index per head with a Holm-corrected p, and the held-out causal check
    of the top-k heads per phase (docs/ablation.md)."""
    import json

    from phasescope.backends import BackendOptions
    from phasescope.inspect.ablation import ablation_matrix
    from phasescope.inspect.heads import MODES

    if mode not in MODES:
        raise InputError(f"--mode {mode!r} is invalid; allowed: {' | '.join(MODES)}")
    try:
        chosen = None if layers is None else [int(v) for v in layers.split(",") if v.strip()]
    except ValueError:
        raise InputError(f"--layers {layers!r}: use layer numbers separated by commas, e.g. 0,1") from None
    options = BackendOptions(dtype=dtype, device=device, trust_remote_code=trust_remote_code, tokenizer=tokenizer)
    result = ablation_matrix(
        model,
        probe,
        offsets=parse_offsets(offsets),
        samples=samples,
        mode=mode,
        layers=chosen,
        seed=seed,
        top_k=top_k,
        n_permutations=permutations,
        progress=True,
        options=options,
        component=component,
        step=step,
        local=local,
        design=design,
    )
    print_ablation(result)
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "ablation.json").write_text(json.dumps(result, indent=1, allow_nan=False))
        console.print(f"wrote {out}/ablation.json")
        report_hint(out)


def print_ablation(result: dict) -> None:
    console.print(
        "baseline accuracy by phase: "
        + "  ".join(f"{b['phase']}:{b['accuracy']:.0%}" for b in result["baseline"] if b["accuracy"] is not None)
    )
    for row in result["heads"]:
        acc = row["accuracy"]
        p = "n/a" if acc["p_holm"] is None else f"{acc['p_holm']:.3f}"
        index = "n/a" if acc["index"] is None else f"{acc['index']:.2f}"
        console.print(
            f"layer {row['layer']} {'KV head' if result.get('component') == 'kv-entries' else 'head'} {row['head']}: "
            f"specialization index {index} "
            f"(preferred phase {acc['preferred_phase']}), Holm p {p}" + ("  SPECIALIZED" if acc["specialized"] else ""),
            highlight=False,
        )
    for c in result["causal"]:
        heads = ", ".join(f"L{layer}H{head}" for layer, head in c["heads"])
        ci = "" if c["ci_low"] is None else f" [{100 * c['ci_low']:+.1f}, {100 * c['ci_high']:+.1f}]"
        p = "" if c["p_value"] is None else f", p {c['p_value']:.3g} (Holm over phases {c['p_holm']:.3g})"
        contrast = "not estimable" if c["contrast"] is None else f"{100 * c['contrast']:+.1f} pp"
        console.print(
            f"phase {c['phase']}: removing {heads} (chosen on {c['chosen_on']} contents) - held-out contrast "
            f"{contrast}{ci}{p} over {c['n_contents']} other contents",
            highlight=False,
        )
