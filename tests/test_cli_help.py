"""`--help` as a user reads it in a 100-column terminal (issue #21): grouped, whole flag names, no type noise."""

import re

import pytest
import typer
from typer.testing import CliRunner

from phasescope.cli import app

runner = CliRunner()
WIDTH = 100
# rich reads the width from COLUMNS; NO_COLOR and no FORCE_COLOR keep escape codes out of the text
ENV = {"COLUMNS": str(WIDTH), "NO_COLOR": "1", "FORCE_COLOR": None, "TERM": "dumb"}
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
SWEEP_PANELS = ["Model", "Probe", "Geometry", "Run", "Served model (openai:)"]  # the issue asks this order

CLI = typer.main.get_command(app)
COMMANDS = sorted(CLI.commands)
NO_OPTIONS = {"schemes", "backends", "recipes", "report"}


def help_text(*args: str, flag: str = "--help", width: int = WIDTH) -> str:
    env = ENV | {"COLUMNS": str(width)}
    result = runner.invoke(app, [*args, flag], env=env, terminal_width=width)
    assert result.exit_code == 0, result.output
    return ANSI.sub("", result.output)


def options(name: str) -> list:
    """The command's options (typer ships its own click, so they are not click.Option instances)."""
    found = [p for p in CLI.commands[name].params if p.param_type_name == "option"]
    assert found or name in NO_OPTIONS, name
    return found


def test_sweep_help_shows_the_common_options_on_a_screen_and_the_rest_one_flag_away():
    """#59 item 7: `sweep --help` was 331 lines at 80 columns; the common options now fit a screen,
    and --help-all shows every option."""
    common = help_text("sweep", width=80)
    assert len(common.splitlines()) <= 66 and "--help-all" in common
    for flag in ("--model", "--probe", "--samples", "--design", "--step", "--offsets", "--out", "--tokenizer"):
        assert flag in common
    assert "--batch-size" not in common and "--concurrency" not in common
    every = help_text("sweep", flag="--help-all", width=80)
    assert "--batch-size" in every and "--concurrency" in every and "--ray-address" in every


def test_sweep_help_groups_its_options_into_panels_in_order():
    text = help_text("sweep", flag="--help-all")
    starts = [text.find(f"╭─ {panel} ─") for panel in SWEEP_PANELS]
    assert -1 not in starts, text
    assert starts == sorted(starts)
    ungrouped = [p.name for p in options("sweep") if not getattr(p, "rich_help_panel", None)]
    assert ungrouped == ["help_all"]  # beside --help


def test_ablate_help_groups_its_options_into_panels():
    text = help_text("ablate")
    for panel in ("Model", "Probe", "Ablation", "Geometry"):
        assert f"╭─ {panel} ─" in text
    assert [p.name for p in options("ablate") if not getattr(p, "rich_help_panel", None)] == []


def test_sweep_help_fits_100_columns_with_every_flag_whole():
    text = help_text("sweep", flag="--help-all")
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= WIDTH
    assert "…" not in text
    for param in options("sweep"):
        for flag in (*param.opts, *param.secondary_opts):
            assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text), f"{flag} is not shown whole"


@pytest.mark.parametrize("name", [*COMMANDS, None])
def test_no_flag_shows_a_bool_placeholder(name):
    # typer 0.29 prints <bool> in the type column of every flag, --help included; phasescope's flags
    # declare an empty metavar, and its command classes (cli/app.py) give --help one too.
    text = help_text(*([name] if name else []))
    assert "--help" in text and "<bool>" not in text


def test_flags_offer_a_negative_form_only_where_it_does_something():
    by_name = {p.name: p for p in options("sweep")}
    for name in ("progress", "prefix_reuse"):  # on by default: --no-X turns them off
        assert by_name[name].secondary_opts == [f"--no-{name.replace('_', '-')}"]
    for name in ("trust_remote_code", "chat_template", "dry_run", "phase_ensemble"):  # off by default
        assert by_name[name].is_flag and by_name[name].default is False and by_name[name].secondary_opts == []


@pytest.mark.parametrize("name", COMMANDS)
def test_every_option_of_every_command_has_help(name):
    for param in CLI.commands[name].params:
        assert (getattr(param, "help", None) or "").strip(), f"{name} {param.name} has no help text"


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_help_exits_0_and_fits_100_columns(name):
    text = help_text(name, flag="--help-all" if name == "sweep" else "--help")
    assert f" {name} [OPTIONS]" in text
    assert max(len(line) for line in text.splitlines()) <= WIDTH
    for param in options(name):
        for flag in (*param.opts, *param.secondary_opts):
            assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text), f"{name}: {flag} is not shown whole"


def test_version_prints_the_version():
    from phasescope.version import __version__

    result = runner.invoke(app, ["--version"], env=ENV)
    assert result.exit_code == 0
    assert result.output.strip() == f"phasescope {__version__}"


@pytest.mark.parametrize("name", ["", *COMMANDS])
def test_no_help_text_is_cut_at_80_columns(name):
    """At 80 columns rich cuts a word longer than its column with '…' (`lm-eval:TASK[,TASK...…`,
    `(docs/reproduction.…`); every help reads whole."""
    result = runner.invoke(app, [*([name] if name else []), "--help"], env=ENV | {"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0 and "…" not in ANSI.sub("", result.output), result.output


def test_commands_are_listed_in_the_order_of_a_study_in_panels():
    """`phasescope --help`: every command has a place in the workflow (a new one must be given
    one), the panels come in the study's order, and each command's help is whole sentences
    (the source's line breaks are not kept)."""
    from phasescope.cli.app import ORDER, WORKFLOW

    assert sorted(ORDER) == COMMANDS, "a command missing from cli.app.WORKFLOW is listed last, in no panel"
    text = help_text()
    positions = [text.index(f"─ {panel} ") for panel in WORKFLOW]
    assert positions == sorted(positions)
    listed = [line.split()[1] for line in text.splitlines() if re.match(r"│ [a-z][a-z-]* ", line)]
    assert listed == ORDER
    assert "(a step-4 compressed model," in text, "the demo's help is one paragraph, wrapped by rich"


def test_sweep_help_names_every_registered_probe():
    """The --probe help comes from the registry: a probe added there is listed without a help edit."""
    from phasescope.probes import probe_forms

    flat = " ".join(help_text("sweep").replace("│", " ").split())
    assert f"What to score: {', '.join(probe_forms())};" in flat
    assert "prompts:FILE.jsonl" in probe_forms() and "kv-retrieval" in probe_forms()
