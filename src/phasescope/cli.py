"""The ``phasescope`` command line. Commands import their heavy dependencies lazily."""

from __future__ import annotations

import functools
import warnings
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from phasescope.errors import InputError

app = typer.Typer(
    help="phasescope: find and measure phase sensitivity in models with chunked KV-cache compression.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()
DEBUG = {"on": False}  # set by --debug before any command runs


def _print_version(asked: bool) -> None:
    if asked:
        from phasescope.version import __version__

        console.print(f"phasescope {__version__}")
        raise typer.Exit()


@app.callback()
def options(
    debug: bool = typer.Option(False, "--debug", metavar="", help="On any error, show the full Python traceback."),
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        metavar="",
        help="Print phasescope's version and exit.",
    ),
) -> None:
    """phasescope: find and measure phase sensitivity in models with chunked KV-cache compression."""
    DEBUG["on"] = debug
    warnings.showwarning = _show_warning


_LIBRARY_WARNING = warnings.showwarning


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """phasescope's own warnings as one plain line; other libraries' in their usual form."""
    if "phasescope" in str(filename) and issubclass(category, UserWarning):
        console.print(f"[yellow]warning:[/] {message}", highlight=False)
    else:
        _LIBRARY_WARNING(message, category, filename, lineno, file, line)


def fail(message: str) -> None:
    """Print a user-facing error and exit with status 2 (no traceback)."""
    console.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code=2)


def _os_message(err: OSError) -> str:
    where = f": {err.filename}" if err.filename else ""
    return f"{err.strerror or err}{where}"


def guarded(command):
    """The one exception boundary: a user's mistake (InputError, a file-system error) becomes
    ``error: ...`` with exit 2; an interruption keeps finished work; anything else is a bug in
    phasescope, reported as such (``--debug`` shows its traceback)."""

    @functools.wraps(command)
    def run(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, typer.BadParameter):
            raise
        except KeyboardInterrupt as err:  # a command that knows more says it in the interrupt's message
            what = err.args[0] if err.args else "finished work is on disk; rerun the same command to continue"
            console.print(f"interrupted: {what}", highlight=False)
            raise typer.Exit(code=130) from None
        except (InputError, OSError) as err:
            if DEBUG["on"]:
                raise
            fail(_os_message(err) if isinstance(err, OSError) else str(err))
        except Exception as err:
            if DEBUG["on"]:
                raise
            console.print(
                f"[bold red]internal error[/] (a bug in phasescope, not in your input): {type(err).__name__}: {err}\n"
                "rerun with --debug (phasescope --debug COMMAND ...) for the traceback, and please report it",
                highlight=False,
            )
            raise typer.Exit(code=1) from None

    return run


def command(*args, **kwargs):
    """``app.command`` behind the exception boundary."""
    return lambda fn: app.command(*args, **kwargs)(guarded(fn))


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
    tokens: int = typer.Option(131072, min=1, help="Context length in tokens."),
    local: int = typer.Option(None, min=0, help="Override the scheme's raw local window L."),
    vocab_size: int = typer.Option(151936, min=2, help="Vocabulary size (does not change the cache)."),
    bytes_per_value: int = typer.Option(2, min=1, help="Bytes per cached number (2 = bf16, 4 = fp32)."),
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
    from pathlib import Path

    from phasescope.demo import run_demo

    run_demo(Path(out), retrain, samples, console)


@command("cache-demo")
def cache_demo(
    tokens: int = typer.Option(2048, min=16, help="Prompt length for the cache measurement."),
) -> None:
    """Engine check: build tiny compressed models and a full-attention control, prefill a
    prompt, decode, and print the measured KV-cache savings."""
    from phasescope.engine_demo import run_engine_demo

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


@command()
def train(
    recipe: str = typer.Argument(..., help="Recipe name (see `phasescope recipes`)."),
    set_: list[str] | None = typer.Option(
        None,
        "--set",
        metavar="KEY=VALUE",
        help="Override a recipe field: key=value; keys: steps, lr, seed, warm_start_steps, init_from (a model "
        "directory or a recipe whose shipped checkpoint starts the run), random_align, model.X, scheme.X, task.X.",
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
    from pathlib import Path

    from phasescope.train.config import apply_overrides
    from phasescope.train.recipes import get_recipe
    from phasescope.train.trainer import train as run_training

    cfg = apply_overrides(get_recipe(recipe), set_ or [])
    if estimate:
        print_estimate(cfg)
        return
    run_dir = Path(out) if out else Path("runs") / f"{cfg.name}-seed{cfg.seed}"
    say = functools.partial(console.print, highlight=False)
    result = run_training(cfg, run_dir, resume=resume, progress=progress, stop_at=stop_after, say=say)
    phases = "  ".join(f"{p}:{a:.0%}" for p, a in enumerate(result["eval_accuracy_by_phase"]))
    console.print(
        f"{cfg.name}: held-out retrieval accuracy {result['eval_accuracy']:.1%} "
        f"(loss {result['eval_loss']:.3f}); by phase mod {result['phase_step']}: {phases}\n"
        f"run directory: {run_dir}"
    )


def parse_offsets(text: str) -> list[int]:
    """'0:24' (start:stop, stop excluded) or '0,1,5'."""
    try:
        if ":" in text:
            start, stop = (int(x) for x in text.split(":"))
            values = list(range(start, stop))
        else:
            values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 0:
        raise typer.BadParameter(f"{text!r}: use start:stop (e.g. 0:24) or a list (e.g. 0,1,2,3)")
    return values


def parse_gaps(text: str) -> tuple[int, ...]:
    """'0,1' -> (0, 1)."""
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise typer.BadParameter(f"--kv-gaps {text!r}: use integers separated by commas, e.g. 0,1") from None


@command()
def sweep(
    model: str = typer.Option(
        ...,
        metavar="SPEC",
        rich_help_panel="Model",
        help="Model to sweep: a phasescope model directory (from `phasescope train`) or hf:DIR (a local "
        "transformers causal LM); all specs: `phasescope backends`.",
    ),
    probe: str = typer.Option(
        "kv-retrieval",
        metavar="PROBE",
        rich_help_panel="Probe",
        help="What to score: kv-retrieval, padding-completion, prompts:FILE.jsonl or lm-eval:TASK[,TASK...]. "
        'prompts: your own, one JSON object a line, {"prompt": ..., "candidates": [...], "target": i} or '
        '{"prompt": ..., "answer": ...}, padded at {pad} or at the start; lm-eval: lm-evaluation-harness tasks '
        "as lm-eval renders them (your YAML tasks: --include-path). See docs/sweeps.md.",
    ),
    out: str = typer.Option(
        ...,
        metavar="DIR",
        rich_help_panel="Run",
        help="Run directory; rerunning the same command resumes an interrupted run.",
    ),
    step: int = typer.Option(
        None, min=1, metavar="S", rich_help_panel="Geometry", help="Compression step (default: the model's config)."
    ),
    align: int = typer.Option(
        None, min=0, metavar="A", rich_help_panel="Geometry", help="Window align (default: the model's config)."
    ),
    offsets: str = typer.Option(
        "0:24",
        metavar="D",
        rich_help_panel="Geometry",
        help="Offsets d to place the content at: start:stop or a comma list; cover two periods of the step or more.",
    ),
    samples: int = typer.Option(
        None,
        min=1,
        metavar="N",
        rich_help_panel="Probe",
        help="Content samples, each scored at every offset (paired); default 50. padding-completion: N distinct "
        "(function, docstring) pairs of its built-in code prompts (at most 64, more is refused); with --probe-file, "
        "every prompt of the file (default) or the first N.",
    ),
    design: str = typer.Option(
        "shift-needle",
        metavar="DESIGN",
        rich_help_panel="Probe",
        help="Placement: shift-needle (the needle moves, length fixed) or pad-prefix (d filler tokens after BOS).",
    ),
    seed: int = typer.Option(0, metavar="SEED", rich_help_panel="Probe", help="Seed of the probe's content."),
    batch_size: int = typer.Option(
        None,
        min=1,
        metavar="N",
        rich_help_panel="Run",
        help="Sequences per forward pass (default 16; fewer for prompts over 2K tokens, 1 from 32K).",
    ),
    probe_file: str = typer.Option(
        None,
        metavar="FILE",
        rich_help_panel="Probe",
        help="padding-completion: your prompts, a JSON object with prompt (containing {pad}), candidates, target, "
        "pad_unit and name, or a list of them (one content each).",
    ),
    local: int = typer.Option(
        None,
        min=0,
        metavar="L",
        rich_help_panel="Geometry",
        help="Raw local window L (default: the model's config; DeepSeek-V4: sliding_window). kv-retrieval keeps "
        "the needle at least L + one compression window before the question.",
    ),
    depth: float = typer.Option(
        0.5,
        min=0.0,
        max=1.0,
        metavar="X",
        rich_help_panel="Probe",
        help="kv-retrieval: where the needle sits in the haystack, 0 (earliest) to 1 (latest).",
    ),
    window: int = typer.Option(
        None,
        min=1,
        metavar="W",
        rich_help_panel="Geometry",
        help="Compression window w for models whose config declares none (default: the step).",
    ),
    dtype: str = typer.Option(
        "float32", metavar="DTYPE", rich_help_panel="Model", help="Weights dtype: float32, bfloat16 or float16."
    ),
    device: str = typer.Option(
        "cpu", metavar="DEVICE", rich_help_panel="Model", help="Torch device for the model: cpu, cuda, cuda:1, mps."
    ),
    trust_remote_code: bool = typer.Option(
        False,
        "--trust-remote-code",
        metavar="",
        rich_help_panel="Model",
        help="hf: run the model directory's own Python code (only if you trust its author).",
    ),
    tokenizer: str = typer.Option(
        None,
        metavar="TOKENIZER",
        rich_help_panel="Model",
        help="Tokenizer: a directory, or deepseek-v4 / qwen3 (shipped by packages, no download). openai: the "
        "served model's (prompts are tokenized here, sent as ids); hf: replaces the directory's own; phasescope "
        "model: the one whose ids it was trained on (for text probes).",
    ),
    concurrency: int = typer.Option(
        8, min=1, metavar="N", rich_help_panel="Served model (openai:)", help="openai: requests in flight at once."
    ),
    timeout: float = typer.Option(
        120.0,
        min=0.1,
        metavar="SECONDS",
        rich_help_panel="Served model (openai:)",
        help="openai: seconds to wait for one request.",
    ),
    retries: int = typer.Option(
        4,
        min=0,
        metavar="N",
        rich_help_panel="Served model (openai:)",
        help="openai: retries (exponential backoff) after a 5xx or a dropped connection.",
    ),
    api_key_env: str = typer.Option(
        "OPENAI_API_KEY",
        metavar="VAR",
        rich_help_panel="Served model (openai:)",
        help="openai: environment variable holding the API key (never logged or stored).",
    ),
    compress: str = typer.Option(
        "none",
        metavar="SPEC",
        rich_help_panel="Model",
        help="hf: run the model with post-hoc chunked compression, e.g. mean:s=4,w=4,L=128 (keys s, w, L, a): "
        "what it would do if its cache were compressed (no retraining).",
    ),
    kv_gaps: str = typer.Option(
        "0",
        metavar="GAPS",
        rich_help_panel="Probe",
        help="kv-retrieval: tokens between the needle's key and value, one rendering each (e.g. 0,1); separates "
        "same-window from split-window at equal value phase.",
    ),
    context_tokens: int = typer.Option(
        None,
        min=64,
        metavar="N",
        rich_help_panel="Probe",
        help="kv-retrieval: fill this many tokens with pairs (needle in a haystack at 128K: 131072). Default: a "
        "haystack just long enough to put the needle beyond the raw window.",
    ),
    pair_format: str = typer.Option(
        "auto",
        metavar="FORMAT",
        rich_help_panel="Probe",
        help="kv-retrieval in text: words (one token each), numbers (six digits), codes (like k7f2-9xq3) or auto "
        "(words when the tokenizer has enough, else numbers: ~16K pairs at 128K on DeepSeek-V4's tokenizer).",
    ),
    filler: str = typer.Option(
        None,
        metavar="TEXT",
        rich_help_panel="Probe",
        help="prompts: and text kv-retrieval: the padding unit, its token count measured in place. Default: the "
        "first that fills cleanly of newline, space, '.', ... (prompts) or ' .', ' -', ... (haystack).",
    ),
    progress: bool = typer.Option(True, metavar="", rich_help_panel="Run", help="Show a progress bar."),
    prefix_reuse: bool = typer.Option(
        True,
        metavar="",
        rich_help_panel="Run",
        help="Read the prefix a content's offsets share once and continue each offset from its cache.",
    ),
    chat_template: bool = typer.Option(
        False,
        "--chat-template",
        metavar="",
        rich_help_panel="Model",
        help="Wrap text prompts in the tokenizer's chat template (its tokens count in every position).",
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        metavar="",
        rich_help_panel="Run",
        help="Build and check every item and print what scoring would cost (passes/requests, tokens); scores nothing.",
    ),
    phase_ensemble: bool = typer.Option(
        False,
        "--phase-ensemble",
        metavar="",
        rich_help_panel="Run",
        help="Test-time remedy: score every prompt at `step` pad lengths (0..step-1 tokens after the first) and "
        "average the predictions; `step` forward passes per prompt (docs/reproduction.md).",
    ),
    ensemble_pad_id: int = typer.Option(
        None,
        min=0,
        metavar="ID",
        rich_help_panel="Run",
        help="--phase-ensemble: the pad token id (default: the task's filler, or a newline/space token).",
    ),
    include_path: str = typer.Option(
        None,
        metavar="DIR",
        rich_help_panel="Probe",
        help="lm-eval:TASK: a directory of your own lm-eval task YAML files, searched before lm-eval's built-in "
        "tasks (datasets from local files: dataset_path json, data_files).",
    ),
) -> None:
    """Place the same content at every offset, score it, append records.jsonl (resumable)."""
    import shlex

    from phasescope.api import sweep as run
    from phasescope.backends import BackendOptions

    args = [
        "--model",
        model,
        "--probe",
        probe,
        "--out",
        out,
        "--offsets",
        offsets,
        "--design",
        design,
        "--seed",
        str(seed),
    ]
    args += ["--batch-size", str(batch_size)] if batch_size is not None else []
    args += ["--samples", str(samples)] if samples is not None else []
    args += ["--step", str(step)] if step is not None else []
    args += ["--align", str(align)] if align is not None else []
    args += ["--local", str(local)] if local is not None else []
    args += ["--window", str(window)] if window is not None else []
    args += ["--dtype", dtype, "--device", device] + (["--trust-remote-code"] if trust_remote_code else [])
    args += ["--compress", compress] if compress != "none" else []
    args += ["--tokenizer", tokenizer] if tokenizer else []
    args += ["--chat-template"] if chat_template else []
    args += ["--depth", str(depth), "--kv-gaps", kv_gaps]
    args += ["--context-tokens", str(context_tokens)] if context_tokens is not None else []
    args += ["--pair-format", pair_format] if pair_format != "auto" else []
    args += ["--filler", filler] if filler is not None else []
    args += ["--phase-ensemble"] if phase_ensemble else []
    args += ["--ensemble-pad-id", str(ensemble_pad_id)] if ensemble_pad_id is not None else []
    args += ["--include-path", include_path] if include_path else []

    args += ["--probe-file", probe_file] if probe_file else []
    from phasescope.probes import CompletionSpec

    if probe_file and probe != "padding-completion":
        fail(f"--probe-file is for --probe padding-completion; the {probe} probe does not read it")
    completion = CompletionSpec.list_from_file(probe_file) if probe_file else None
    result = run(
        model,
        probe,
        step=step,
        align=align,
        offsets=parse_offsets(offsets),
        samples=samples,
        design=design,
        seed=seed,
        batch_size=batch_size,
        out=out,
        progress=progress,
        completion=completion,
        local=local,
        depth=depth,
        kv_gaps=parse_gaps(kv_gaps),
        window=window,
        options=BackendOptions(
            dtype=dtype,
            device=device,
            trust_remote_code=trust_remote_code,
            compress=compress,
            tokenizer=tokenizer,
            concurrency=concurrency,
            timeout=timeout,
            retries=retries,
            api_key_env=api_key_env,
        ),
        dry_run=dry_run,
        chat_template=chat_template,
        prefix_reuse=prefix_reuse,
        context_tokens=context_tokens,
        pair_format=pair_format,
        filler=filler,
        phase_ensemble=phase_ensemble,
        ensemble_pad_id=ensemble_pad_id,
        include_path=include_path,
        command="phasescope sweep " + " ".join(shlex.quote(a) for a in args),
    )
    if result.geometry is not None:
        console.print(f"geometry: {result.geometry.describe()}", highlight=False)
    if result.plan is not None:
        console.print("dry run (nothing scored or written): " + ", ".join(f"{k} {v:,}" for k, v in result.plan.items()))
        return
    if result.scored == 0:
        console.print(f"{out}: already complete ({len(result.records)} records); nothing to score")
    else:
        console.print(f"{out}: scored {result.scored} records ({len(result.records)} in total)")


@command()
def analyze(
    run_dir: str = typer.Argument(..., help="Run directory holding records.jsonl."),
    resamples: int = typer.Option(2000, min=100, help="Bootstrap resamples and permutations."),
) -> None:
    """Per-phase accuracy (raw and drift-adjusted), gap with interval and p-value, period, phase dependence,
    same-window contrast -> metrics.json (statistics from records.jsonl alone)."""
    from phasescope.api import analyze as run

    metrics = run(run_dir, n_resamples=resamples)
    print_metrics(metrics, title=run_dir)
    if metrics.get("records_note"):
        console.print(f"[yellow]note:[/] {metrics['records_note']}", highlight=False)
    for table in task_metric_tables(metrics.get("task_metrics") or {}):
        console.print(table)
    console.print(f"wrote {Path(run_dir) / 'metrics.json'}", highlight=False)


def task_metric_tables(per_task: dict) -> list[Table]:
    """lm-eval tasks: each metric per phase, with its 95% interval by document, and at offset 0."""
    tables = []
    for task, metrics in per_task.items():
        table = Table(title=f"lm-eval task {task}: its metrics per phase (offset 0 = lm-eval's own rendering)")
        for col in ("metric", "offset 0", *(f"phase {p['phase']}" for p in next(iter(metrics.values()))["phases"])):
            table.add_column(col, justify="right")
        table.add_column("max-min pp (raw)", justify="right")
        for metric, summary in metrics.items():
            cells = [_value_ci(p["value"], p["ci"]) for p in summary["phases"]]
            gap = summary["gap_raw_pp"]
            table.add_row(metric, _value_ci(summary["offset_0"], None), *cells, "-" if gap is None else f"{gap:.1f}")
        tables.append(table)
    return tables


def _value_ci(value, ci) -> str:
    if value is None:
        return "not estimable"
    return f"{value:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


@command()
def export(
    run_dir: str = typer.Argument(..., help="Run directory of `phasescope sweep`."),
    format: str = typer.Option(
        "csv",
        "--format",
        help="csv, parquet or jsonl: the records (prompt ids, lm-eval task and doc_id included), per-phase, "
        "per-offset and task-metric tables, one file each; lm-eval: one results JSON shaped like lm-eval's "
        "(results[task][metric] at offset 0 plus phase_results[task][phase][metric]).",
    ),
    out: str = typer.Option(
        None,
        help="Where to write: a directory for tables (default RUN/export), a file for lm-eval (default "
        "RUN/lm_eval_results.json).",
    ),
) -> None:
    """The run's numbers as files for pandas, spreadsheets or lm-eval's tooling (needs phasescope\\[export])."""
    from phasescope.export import export as run

    for path in run(run_dir, format, out):
        console.print(f"wrote {path}")


def print_metrics(metrics: dict, title: str) -> None:
    """The verdict, the per-phase table (80 columns) and the detail lines of `analyze`."""
    from phasescope.reporting.terminal import detail_lines, phase_table, probability_renderables, verdict_text

    verdict = verdict_text(metrics)
    if verdict:
        console.print(verdict, highlight=False)
    console.print(phase_table(metrics, title))
    for line in detail_lines(metrics):
        console.print(line, highlight=False)
    for renderable in probability_renderables(metrics):
        console.print(renderable, highlight=False)


@command()
def report(
    run_dir: str = typer.Argument(..., help="Run directory (analyzed first if metrics.json is missing)."),
) -> None:
    """Figures (figures/*.png) and one self-contained report.html."""
    from phasescope.api import report as run

    path = run(run_dir)
    console.print(f"report: {path}")


def report_hint(out: str) -> None:
    """After writing a section file (ablation/preferences/theory.json) into a sweep run directory."""
    from pathlib import Path

    if (Path(out) / "records.jsonl").exists():
        console.print(f"{out} is a sweep run: `phasescope report {out}` adds this to its report.html", soft_wrap=True)


@command()
def compare(
    runs: list[str] = typer.Argument(
        ..., help="Run directories (the --out of `phasescope sweep`); meant for two or more, one works too."
    ),
    out: str = typer.Option(..., help="Directory for compare.html and its figures (created if needed)."),
    label: list[str] | None = typer.Option(
        None,
        "--label",
        help="Name of a run in the table and figures; repeat once per run, in order (default: directory names).",
    ),
) -> None:
    """Several sweep runs side by side -> DIR/compare.html (self-contained): per-phase accuracy with
    intervals clustered by content, one column per run; gap, p and period; accuracy over offsets overlaid; gaps
    as a forest plot. A run's metrics.json is recomputed first when missing or stale, as by `report`."""
    from pathlib import Path

    from phasescope.api import compared_runs
    from phasescope.reporting.compare import rich_table, run_notes, write_compare

    compared = compared_runs(runs, label)
    path = write_compare(compared, Path(out))
    console.print(rich_table(compared))
    for run in compared:
        if verdict := (run.metrics.get("verdict") or {}).get("sentence"):
            console.print(f"[bold]{run.label}[/]: {verdict}", highlight=False)
    for line in run_notes(compared):
        console.print(f"note: {line}", highlight=False)
    if len(compared) == 1:
        console.print("note: one run, nothing to compare it with (compare is meant for two or more)")
    console.print(f"compare: {path}")


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
    from pathlib import Path

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
    from pathlib import Path

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
    from pathlib import Path

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
    from pathlib import Path

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


def print_estimate(cfg) -> None:
    from phasescope.train.estimate import duration, estimate

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


def main() -> None:
    app()


if __name__ == "__main__":
    main()
