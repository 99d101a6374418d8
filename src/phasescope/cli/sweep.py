"""`phasescope sweep`: its options as one table (``SWEEP_OPTIONS``; panels group them in --help),
the typed sweep built from them (``sweep_specs``), and what it prints."""

from __future__ import annotations

import time

import typer

from phasescope import specs
from phasescope.cli.app import command, console, say_path, with_options
from phasescope.cli.options import STEP
from phasescope.errors import InputError
from phasescope.probes import probe_forms
from phasescope.specs import RunOptions, SweepSpec


def parse_offsets(text: str) -> list[int]:
    """'0:24' (start:stop, stop excluded) or '0,1,5' (specs.parse_offsets, as a parameter error)."""
    try:
        return specs.parse_offsets(text)
    except InputError as err:
        raise typer.BadParameter(str(err).removeprefix("offsets ")) from None


def declared_option(declared) -> tuple[type, object]:
    """The command-line option of a declared option (phasescope/options.py): its default, flag,
    help, metavar, panel and bounds."""
    from phasescope.options import as_text, flag

    meta, default = declared.metadata, declared.default
    name = flag(declared.name)
    if isinstance(default, bool):
        decls = [f"{name}/{meta['off_flag']}"] if meta["off_flag"] else [name]
        return bool, typer.Option(default, *decls, metavar="", rich_help_panel=meta["panel"], help=meta["help"])
    kind = str if meta["parse"] else _value_type(declared)
    shown = as_text(default) if isinstance(default, tuple) else default
    bounds = {k: meta[k] for k in ("min", "max") if meta[k] is not None}
    option = typer.Option(
        shown, name, metavar=meta["metavar"], rich_help_panel=meta["panel"], help=meta["help"], **bounds
    )
    return kind, option


def probe_option(name: str) -> tuple[type, object]:
    """A probe option on the command line, from its declaration (probes/options.py)."""
    from phasescope.probes import declared_options

    return declared_option(declared_options()[name])


def backend_option(name: str) -> tuple[type, object]:
    """A model option on the command line, from its backend's declaration (backends/options.py)."""
    from phasescope.backends import declared_options

    return declared_option(declared_options()[name])


def _value_type(declared) -> type:
    """int, float or str: what the command line reads for a declared option (``int | None`` -> int)."""
    text = str(declared.type)
    return int if text.startswith("int") else float if text.startswith("float") else str


def declared_options_not_in(table: dict, probes: bool = True) -> dict:
    """Every probe (``probes``) and backend option the table does not place: a new one joins its panel."""
    from phasescope.backends import declared_options as backend_declared
    from phasescope.probes import declared_options as probe_declared

    placed = {name: probe_option(name) for name in probe_declared() if name not in table} if probes else {}
    return placed | {name: backend_option(name) for name in backend_declared() if name not in table}


SWEEP_OPTIONS = {  # parameter: (type, typer option); panels group them in --help
    "model": (
        str,
        typer.Option(
            ...,
            metavar="SPEC",
            rich_help_panel="Model",
            help="Model: a phasescope model directory, hf:DIR (transformers), openai:URL#NAME (served) or "
            "demo:NAME (shipped, e.g. demo:tiny-s4); all: `phasescope backends`.",
        ),
    ),
    "dtype": backend_option("dtype"),
    "device": backend_option("device"),
    "trust_remote_code": backend_option("trust_remote_code"),
    "tokenizer": backend_option("tokenizer"),
    "compress": backend_option("compress"),
    "chat_template": probe_option("chat_template"),
    "probe": (
        str,
        typer.Option(
            "kv-retrieval",
            metavar="PROBE",
            rich_help_panel="Probe",
            help=f"What to score: {', '.join(probe_forms())}; prompts: your own, one JSON object a line; "
            "lm-eval: lm-evaluation-harness tasks (your YAML tasks: --include-path). Formats: docs/sweeps.md.",
        ),
    ),
    "samples": (
        int,
        typer.Option(
            None,
            min=1,
            metavar="N",
            rich_help_panel="Probe",
            help="Content samples, each scored at every offset (paired); default 50. padding-completion: at "
            "most 64 (its built-in code prompts); with --probe-file, every prompt of the file or the first N.",
        ),
    ),
    "design": probe_option("design"),
    "seed": (int, typer.Option(0, metavar="SEED", rich_help_panel="Probe", help="Seed of the probe's content.")),
    "probe_file": probe_option("probe_file"),
    "depth": probe_option("depth"),
    "kv_gaps": probe_option("kv_gaps"),
    "context_tokens": probe_option("context_tokens"),
    "pair_format": probe_option("pair_format"),
    "filler": probe_option("filler"),
    "same_phase": probe_option("same_phase"),
    "include_path": probe_option("include_path"),
    "step": STEP,
    "align": (
        int,
        typer.Option(
            None, min=0, metavar="A", rich_help_panel="Geometry", help="Window align (default: the model's config)."
        ),
    ),
    "offsets": (
        str,
        typer.Option(
            None,
            metavar="D",
            rich_help_panel="Geometry",
            help="Offsets d: start:stop or a comma list. Default: six windows of the step, at least 24 (0:24 at "
            "step 4), what the statistics need to tell the phases from a drift.",
        ),
    ),
    "local": (
        int,
        typer.Option(
            None,
            min=0,
            metavar="L",
            rich_help_panel="Geometry",
            help="Raw local window L (default: the model's config; DeepSeek-V4: sliding_window). kv-retrieval keeps "
            "the needle at least L + one compression window before the question.",
        ),
    ),
    "window": (
        int,
        typer.Option(
            None,
            min=1,
            metavar="W",
            rich_help_panel="Geometry",
            help="Compression window w for models whose config declares none (default: the step).",
        ),
    ),
    "out": (
        str,
        typer.Option(
            ...,
            metavar="DIR",
            rich_help_panel="Run",
            help="Run directory; rerunning the same command resumes an interrupted run.",
        ),
    ),
    "batch_size": (
        int,
        typer.Option(
            None,
            min=1,
            metavar="N",
            rich_help_panel="Run",
            help="Sequences per forward pass (default 16; fewer for prompts over 2K tokens, 1 from 32K).",
        ),
    ),
    "progress": (bool, typer.Option(True, metavar="", rich_help_panel="Run", help="Show a progress bar.")),
    "prefix_reuse": (
        bool,
        typer.Option(
            True,
            metavar="",
            rich_help_panel="Run",
            help="Read the prefix a content's offsets share once and continue each offset from its cache.",
        ),
    ),
    "dry_run": (
        bool,
        typer.Option(
            False,
            "--dry-run",
            metavar="",
            rich_help_panel="Run",
            help="Build and check every item and print what scoring would cost (passes/requests, tokens); scores "
            "nothing.",
        ),
    ),
    "phase_ensemble": (
        bool,
        typer.Option(
            False,
            "--phase-ensemble",
            metavar="",
            rich_help_panel="Run",
            help="Test-time remedy: score every prompt at `step` pad lengths (0..step-1 tokens after the first) and "
            "average the predictions; `step` forward passes per prompt (see reproduction.md in docs).",
        ),
    ),
    "ensemble_pad_id": (
        int,
        typer.Option(
            None,
            min=0,
            metavar="ID",
            rich_help_panel="Run",
            help="--phase-ensemble: the pad token id (default: the task's filler, or a newline/space token).",
        ),
    ),
    "adopt_records": (
        bool,
        typer.Option(
            False,
            "--adopt-records",
            metavar="",
            rich_help_panel="Run",
            help="--out holds records but lost its manifest.json, or was swept from a served model now at another "
            "address: vouch that they come from this --model and write a new manifest (without it such a run is "
            "refused: its records cannot be checked).",
        ),
    ),
    "log_samples": (
        bool,
        typer.Option(
            False,
            "--log-samples",
            metavar="",
            rich_help_panel="Run",
            help="Also write RUN/samples.jsonl: each scored record's prompt (ids, and text when there is a "
            "tokenizer) and candidates, as lm-eval's --log_samples; export adds them to the records table.",
        ),
    ),
    "shard": (
        str,
        typer.Option(
            None,
            metavar="I/N",
            rich_help_panel="Run",
            help="Score the I-th of N parts of this sweep (contents I, I+N, ...; I counts from 0, as a job array's "
            "ids), into its own --out; `phasescope merge` joins the parts into the run the unsplit sweep writes "
            "(docs/scale.md).",
        ),
    ),
    "resume": (
        bool,
        typer.Option(
            False,
            "--resume",
            metavar="",
            rich_help_panel="Run",
            help="Continue the run in --out (a rerun of the same command always does: this only makes a --out "
            "that holds no run an error).",
        ),
    ),
}

SWEEP_OPTIONS |= declared_options_not_in(SWEEP_OPTIONS)  # the openai: options, and any new one

RAY_OPTIONS = {  # how the sweep runs on a cluster (phasescope/scale.py): the driver's, never a part's spec
    "ray": (
        bool,
        typer.Option(
            False,
            "--ray",
            metavar="",
            rich_help_panel="Run",
            help="Run the sweep as --ray-parts Ray tasks on an existing Ray cluster (RAY_ADDRESS or --ray-address; "
            "pip install 'phasescope[ray]'), each part in OUT/parts/, merged into --out at the end; a rerun resumes.",
        ),
    ),
    "ray_address": (
        str,
        typer.Option(
            None,
            metavar="ADDRESS",
            rich_help_panel="Run",
            help="--ray: the cluster to join (default: RAY_ADDRESS; 'local' starts one on this machine).",
        ),
    ),
    "ray_parts": (
        int,
        typer.Option(
            None,
            metavar="N",
            rich_help_panel="Run",
            help="--ray: parts to split the sweep into (default: the cluster's GPUs for a local model, its CPUs for a "
            "served one; at most --samples).",
        ),
    ),
}


SWEEP_EXAMPLES = (
    "Examples: phasescope sweep --model demo:tiny-s4 --out runs/tiny  ·  phasescope sweep --model "
    "openai:http://localhost:8000/v1#my-model --tokenizer deepseek-v4 --step 4 --out runs/served  ·  then "
    "phasescope analyze RUN; phasescope report RUN. Every option: --help-all."
)


# what `sweep --help` shows; the rest (backend, batching, served-model, Ray, resume details) after --help-all
SWEEP_COMMON = ("model", "tokenizer", "probe", "samples", "design", "step", "offsets", "out", "dry_run")


@command(epilog=SWEEP_EXAMPLES)
@with_options(SWEEP_OPTIONS | RAY_OPTIONS, common=SWEEP_COMMON)
def sweep(ctx, **given) -> None:
    """Place the same content at every offset, score it, append records.jsonl (resumable)."""
    from phasescope.assemble import assemble, run_assembled

    ray = {name: given.pop(name) for name in ("ray", "ray_address", "ray_parts")}
    if (ray["ray"] or ray["ray_address"] or ray["ray_parts"]) and not given.get("dry_run"):
        return sweep_on_ray(ctx, given, ray)
    if ray["ray_parts"] and not given.get("shard"):  # --ray --dry-run: the plan of every part
        given["shard"] = f"0/{ray['ray_parts']}"
    spec, run = sweep_specs(given, given_on_command_line(ctx, given))
    start = time.perf_counter()
    with console.status(f"loading {spec.model} and building the {spec.probe.name} probe"):
        prepared = assemble(spec, task=None, tokenizer=None, completion=completion_prompts(given))
    console.print(f"geometry: {prepared.geometry.describe()}", highlight=False)  # before scoring: what phases mean
    console.print(f"design: {design_line(prepared.probe)}", highlight=False)
    result = run_assembled(prepared, run, say=lambda text: console.print(text, highlight=False))
    print_sweep(result, run, time.perf_counter() - start)
    if ray["ray"] and not ray["ray_parts"]:
        console.print(
            "--ray: the sweep would run as one part per GPU of the cluster (per CPU for a served model); pass "
            "--ray-parts N to see each part's cost",
            highlight=False,
        )


def sweep_on_ray(ctx, given: dict, ray: dict) -> None:
    """`sweep --ray`: the parts as Ray tasks, merged into --out (phasescope/scale.py)."""
    from phasescope.scale import run_on_ray

    if not ray["ray"]:
        raise InputError("--ray-address and --ray-parts go with --ray: add it, or drop them")
    if given.get("shard"):
        raise InputError("--ray splits the sweep itself: drop --shard")
    if given.get("out") is None:
        raise InputError(
            "--ray writes the parts and the merged run under --out: pass --out DIR (storage every node reaches)"
        )
    explicit = given_on_command_line(ctx, given)
    options = read_declared({name: given[name] for name in explicit if name not in ("model",)})
    if "offsets" in options:
        options["offsets"] = parse_offsets(given["offsets"])
    result = run_on_ray(
        given["model"],
        ray["ray_address"],
        ray["ray_parts"],
        say=lambda text: console.print(text, highlight=False),
        **options,
    )
    say_path(f"{given['out']}: {len(result.records)} records merged from {result.parts} parts")


@command()
def merge(
    parts: list[str] = typer.Argument(..., help="The run directories of every part (the --out of each sweep --shard)."),
    out: str = typer.Option(..., metavar="DIR", help="Where to write the merged run (a directory of its own)."),
) -> None:
    """Join the parts of a split sweep (sweep --shard I/N, one per job of an array) into the run the unsplit sweep
    writes: the same spec.json, every record once, sorted; it checks that the parts are one sweep, scored by one
    model, every part there and complete, before it writes anything. Then analyze, report and compare it as any
    run (docs/scale.md)."""
    from phasescope.scale import merge as join

    merged = join(parts, out)
    say_path(f"{merged.run_dir}: {len(merged.records)} records merged from {merged.parts} parts")


def design_line(probe) -> str:
    """Which phases the probe's design moves and which it holds (docs/design.md, 'Where the phase lives')."""
    from phasescope.designs import describe

    design = getattr(getattr(probe, "params", None), "design", None)
    if design is not None:
        return f"{design} {describe(design)}"
    return (
        "the answer moves: its first token is the anchor and the prompt end, so the needle's and the prompt end's "
        "phase move together and their distance is held at 0"
    )


def given_on_command_line(ctx, given: dict) -> set[str]:
    """The options the user typed (``ctx``: typer's context), not those left at their defaults."""
    typed = ("COMMANDLINE", "ENVIRONMENT")
    return {name for name in given if getattr(ctx.get_parameter_source(name), "name", None) in typed}


def sweep_specs(o: dict, explicit: set[str] | None = None) -> tuple[SweepSpec, RunOptions]:
    """The typed sweep and how to run it, from the command line's values (the reproducing
    command is then ``spec.command(run)``); ``explicit``: the options the user typed."""
    from phasescope.run.settings import sweep_settings

    options = read_declared({name: value for name, value in o.items() if name != "model" and name not in RAY_OPTIONS})
    options["offsets"] = None if o["offsets"] is None else parse_offsets(o["offsets"])
    return sweep_settings(o["model"], explicit=explicit, **options)


def read_declared(options: dict) -> dict:
    """``options`` with the text of a probe's option that has its own reader parsed (--kv-gaps 0,1)."""
    from phasescope.probes import declared_options

    options = dict(options)
    for name, declared in declared_options().items():
        parse = declared.metadata["parse"]
        if parse is not None and isinstance(options.get(name), str):
            options[name] = parse(options[name])
    return options


def completion_prompts(o: dict):
    """padding-completion's own prompts (--probe-file), or None."""
    from phasescope.probes import CompletionSpec

    return CompletionSpec.list_from_file(o["probe_file"]) if o["probe_file"] else None


def print_sweep(result, run: RunOptions, seconds: float) -> None:
    """What the sweep did (``seconds``: the command's time after parsing, for the dry run's start-up)."""
    if result.plan is not None:
        print_plan(result.plan, seconds - result.plan.get("timing_seconds", 0.0))
        return
    if result.scored == 0:
        say_path(f"{run.out}: already complete ({len(result.records)} records); nothing to score")
    else:
        say_path(f"{run.out}: scored {result.scored} records ({len(result.records)} in total)")


def print_parts(parts: list[dict]) -> None:
    """--shard I/N --dry-run: every part's cost, one row each (the plan above is part I's)."""
    from rich.table import Table

    columns = [k for k in parts[0] if k != "longest_sequence"]
    table = Table("part", *columns, title=f"the {len(parts)} parts of the sweep (--shard I/{len(parts)})")
    for index, part in enumerate(parts):
        table.add_row(str(index), *(f"{part[k]:,}" for k in columns))
    console.print(table)


def print_plan(plan: dict, startup: float) -> None:
    """The dry run: what scoring would cost, and how long the sweep would take here: the start-up
    this dry run paid (loading the model, building and checking every content), which the sweep
    pays again, and the scoring (one batch timed)."""
    from phasescope.reporting.text import duration

    plan = dict(plan)
    plan.pop("timing_seconds", None)
    seconds, timed = plan.pop("estimated_seconds", None), plan.pop("timed_batch", None)
    why_not, design = plan.pop("not_timed", None), plan.pop("design", None)
    parts = plan.pop("parts", None)
    console.print("dry run (nothing scored or written): " + ", ".join(f"{k} {v:,}" for k, v in plan.items()))
    if parts is not None:
        print_parts(parts)
    if design is not None:
        console.print(
            f"design: {design['windows']:g} windows of the step; phase gap {design['gap']}; period test "
            f"{design['period']}" + (f"; {design['advice']}" if design["advice"] else ""),
            highlight=False,
        )
    start = f"{duration(startup)} to load the model and build and check every content (measured now)"
    if seconds is not None:
        console.print(
            f"estimated time here: about {duration(startup + seconds)}: {start}, and {duration(seconds)} to score "
            f"(one batch of {timed} records timed)",
            highlight=False,
        )
    else:
        console.print(f"start-up here: {start}", highlight=False)
        if why_not is not None:
            console.print(f"not timed: {why_not}; time one record with --samples 1 --offsets 0:1 (without --dry-run)")
