"""Every `phasescope` command in README.md's and docs/*.md's bash blocks is one this version
parses, as written (#46 item 3): its command exists, every option it names exists with a value of
the right type, and a shipped model it names by ``demo:NAME`` exists; a command naming a file of
the repository by path (``src/phasescope/assets/...``) would not run from another directory and
is refused here. The sweeps of a shipped model run as a dry run from a temporary directory, and
their offsets can test the gap and the period."""

import shlex
from pathlib import Path

import click
import pytest
import typer

ROOT = Path(__file__).resolve().parents[1]
PLACEHOLDER = ("[", "|", "$", "SPEC", " DIR", "RUN1", "FILE", "...")  # a synopsis, not a command


def bash_blocks(path: Path) -> list[str]:
    """The bodies of the file's ```bash blocks."""
    blocks, body, inside = [], [], False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            if inside:
                blocks.append("\n".join(body))
            inside, body = (not inside and line.strip() == "```bash"), []
            continue
        if inside:
            body.append(line)
    return blocks


def commands() -> list[tuple[str, list[str]]]:
    out = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in bash_blocks(path):
            for line in block.replace("\\\n", " ").splitlines():
                line = line.split(" #")[0].strip()
                if line.startswith("phasescope ") and not any(p in line for p in PLACEHOLDER):
                    out.append((f"{path.relative_to(ROOT)}: {line}", shlex.split(line)[1:]))
    return out


COMMANDS = commands()


def test_the_docs_have_commands_of_every_main_kind():
    kinds = {args[0] for _, args in COMMANDS}
    assert {"sweep", "analyze", "report", "compare", "train", "ablate", "preferences"} <= kinds, kinds


@pytest.mark.parametrize(("name", "args"), COMMANDS, ids=[name for name, _ in COMMANDS])
def test_every_documented_command_parses_as_written(name, args, tmp_path, monkeypatch):
    from phasescope.cli import app
    from phasescope.shipped import TEXT_DEMO, expand, shipped_names

    monkeypatch.chdir(tmp_path)  # from any directory, not the repository's
    group = typer.main.get_command(app)
    with group.make_context("phasescope", list(args)) as ctx:
        command = group.get_command(ctx, args[0])
        assert command is not None, f"{name}: no command {args[0]!r}"
        try:
            command.make_context(args[0], list(args[1:]), parent=ctx)
        except click.UsageError as err:
            pytest.fail(f"{name}: {err.format_message()}")
    for value in args[1:]:
        assert "src/phasescope" not in value, f"{name}: names a file of the repository; use its shipped name"
        if value.startswith("demo:"):  # a shipped model, or one built on first use (demo:deepseek-v4-text)
            assert value.removeprefix("demo:") in shipped_names(), f"{name}: no shipped model {value}"
            assert value == f"demo:{TEXT_DEMO}" or Path(expand(value).removeprefix("hf:")).is_dir(), name


SHIPPED_SWEEPS = [(n, a) for n, a in COMMANDS if a[0] == "sweep" and any(v.startswith("demo:") for v in a)]


@pytest.mark.parametrize(("name", "args"), SHIPPED_SWEEPS, ids=[name for name, _ in SHIPPED_SWEEPS])
def test_a_documented_sweep_of_a_shipped_model_runs_from_any_directory_and_can_test(name, args, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from phasescope.cli import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PHASESCOPE_CACHE", str(tmp_path / "cache"))  # a model built on first use goes here
    result = CliRunner().invoke(app, [*args, "--dry-run"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, f"{name}: {result.output}"
    assert "phase gap testable" in result.output and "period test testable" in result.output, result.output
