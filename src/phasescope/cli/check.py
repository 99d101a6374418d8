"""`phasescope check` (a serving stack's regression check) and `phasescope replay` (one reproducer
sent again)."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from phasescope.cli.app import command, console, say_path, with_options
from phasescope.cli.gating import GATE_OPTIONS, finish_gate
from phasescope.cli.sweep import SWEEP_OPTIONS, given_on_command_line, parse_offsets, print_plan, read_declared
from phasescope.errors import InputError

CHECK_PANEL = "The check"
# the sweep's options apply to both sweeps, except those the check sets itself
NOT_FROM_SWEEP = ("model", "out", "log_samples", "resume", "adopt_records")

CHECK_OPTIONS = {
    "stack": (
        str,
        typer.Option(
            ...,
            metavar="SPEC",
            rich_help_panel=CHECK_PANEL,
            help="The stack under test, usually a served model (openai:URL#MODEL, with --tokenizer).",
        ),
    ),
    "reference": (
        str | None,
        typer.Option(
            None,
            metavar="SPEC",
            rich_help_panel=CHECK_PANEL,
            help="What the stack must agree with on the same token ids: hf:DIR on the same weights, or a trusted "
            "endpoint (openai:URL#MODEL). Without it, --reference-free.",
        ),
    ),
    "out": (
        str,
        typer.Option(
            ...,
            rich_help_panel=CHECK_PANEL,
            help="Directory for the check: reference/, stack/, stack-repeat/, compare/ (gate.json, junit.xml, "
            "summary.md, reproducers/) and check.json.",
        ),
    ),
    "preset": (
        str | None,
        typer.Option(
            None,
            metavar="NAME",
            rich_help_panel=CHECK_PANEL,
            help="canary: the crossed design, numbers pairs, --answers generation, 24 contents x offsets 0:16 "
            "(options you give override it); with --dry-run it prints its requests and tokens.",
        ),
    ),
    "repeat": (
        bool,
        typer.Option(
            True,
            "--repeat/--no-repeat",
            metavar="",
            rich_help_panel=CHECK_PANEL,
            help="Send the stack's prompts again in a seeded shuffled order: answers that change are a request-state "
            "finding (cache state or nondeterminism), and the comparison then reads the shuffled pass.",
        ),
    ),
    "shuffle_seed": (
        int,
        typer.Option(0, metavar="SEED", rich_help_panel=CHECK_PANEL, help="Seed of the repeat pass's order."),
    ),
    "config_lengths": (
        bool,
        typer.Option(
            True,
            "--config-lengths/--no-config-lengths",
            metavar="",
            rich_help_panel=CHECK_PANEL,
            help="Without --context-tokens: when the reference's or the tokenizer's config.json declares length "
            "thresholds (DeepSeek-V4: index_topk x compress rate = 2,048), sweep lengths that straddle each "
            "(3T/4 and 3T/2).",
        ),
    ),
    **GATE_OPTIONS,
    **{name: option for name, option in SWEEP_OPTIONS.items() if name not in NOT_FROM_SWEEP},
}


@command(
    epilog="Example: phasescope check --stack openai:http://gpu:8000/v1#dsv4 --reference hf:/models/dsv4 "
    "--tokenizer /models/dsv4 --preset canary --step 4 --local 128 --out runs/check  ·  in CI: add --junit "
    "report.xml --summary-md $GITHUB_STEP_SUMMARY; exit 0 pass, 1 the stack departs, 2 an error."
)
@with_options(CHECK_OPTIONS)
def check(ctx, **given) -> None:
    """A serving stack's regression check: sweep the reference and the stack on identical token ids, send the
    stack's prompts again in a shuffled order, and gate the paired comparison (exit 0 pass, 1 the stack departs,
    2 an error), naming the factor, period, length band or request state the departures follow and saving a
    reproducer per failing cell (docs/serving.md, 'Catch serving regressions in CI')."""
    from phasescope.check import PRESETS, model_config, threshold_lengths
    from phasescope.check import check as run
    from phasescope.gate import Thresholds

    if given["reference"] is None and not given["reference_free"]:
        raise InputError("pass --reference MODEL (what the stack must agree with), or --reference-free")
    if given["reference"] is not None and given["reference_free"]:
        raise InputError("--reference-free compares the stack with the known answers: drop --reference, or it")
    typed = given_on_command_line(ctx, given)
    options = dict(PRESETS[_preset(given["preset"])]) if given["preset"] else {}
    sweep_names = set(SWEEP_OPTIONS) - set(NOT_FROM_SWEEP)
    options |= read_declared({name: given[name] for name in typed & sweep_names})
    if "offsets" in typed:
        options["offsets"] = parse_offsets(given["offsets"])
    if "context_tokens" not in options and given["config_lengths"]:
        lengths = threshold_lengths(model_config(given["reference"], given["tokenizer"]))
        if lengths:
            options["context_tokens"] = tuple(lengths)
            console.print(f"lengths from the config's thresholds: {', '.join(f'{n:,}' for n in lengths)} tokens")
    thresholds = Thresholds(given["max_departures"], given["alpha"], given["logprob_tol"])
    start = time.perf_counter()
    decided = run(
        given["stack"],
        given["out"],
        given["reference"],
        repeats=given["repeat"],
        shuffle_seed=given["shuffle_seed"],
        thresholds=thresholds,
        say=lambda text: console.print(text, highlight=False),
        **options,
    )
    if "plans" in decided:
        for name, plan in decided["plans"].items():
            console.print(f"[bold]{name}[/]:", highlight=False)
            print_plan(plan, time.perf_counter() - start)
        return
    console.print(f"[bold]paired[/]: {decided['sentence']}", highlight=False)
    state = decided.get("request_state")
    if state and state["differ"]:
        console.print(f"[bold]request state[/]: {state['differ']} of {state['repeated']}: {state['sentence']}")
    finish_gate(decided, Path(given["out"]) / "compare", given["junit"], given["summary_md"])


def _preset(name: str) -> str:
    from phasescope.check import PRESETS

    if name not in PRESETS:
        raise InputError(f"--preset {name!r} is unknown; the presets: {', '.join(PRESETS)}")
    return name


@command()
def replay(
    reproducer: str = typer.Argument(..., help="A reproducer of `compare --paired` or `check` (reproducers/*.json)."),
    model: str = typer.Option(
        ..., metavar="SPEC", help="The endpoint to send it to: openai:http://HOST:PORT/v1#MODEL (any stack)."
    ),
    times: int = typer.Option(1, min=1, max=1000, metavar="N", help="Send it N times (a flaky fault shows in some)."),
    timeout: float = typer.Option(120.0, metavar="SECONDS", help="Seconds to wait for each answer."),
) -> None:
    """Send one reproducer's request again and say whether the fault reproduces: exit 0 when every answer is the
    expected one, 1 when one is not (the fault reproduced), 2 on an error."""
    from phasescope.replay import replay as run

    result = run(reproducer, model, times=times, timeout=timeout)
    for line in result["lines"]:
        console.print(line, highlight=False)
    say_path(f"replayed {reproducer} against {model}: {'reproduced' if result['reproduced'] else 'not reproduced'}")
    raise typer.Exit(code=1 if result["reproduced"] else 0)
