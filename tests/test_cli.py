"""The command line as a user runs it."""

from typer.testing import CliRunner

from phasescope.cli import app
from phasescope.kv import POOLERS, SCHEMES

runner = CliRunner()


def test_help_lists_commands():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("schemes", "savings", "demo", "cache-demo", "train", "recipes", "sweep", "analyze", "report"):
        assert command in result.output


def test_version_prints_the_package_version():
    from importlib.metadata import version

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"phasescope {version('phasescope')}"


def test_schemes_lists_every_scheme_and_pooler():
    result = runner.invoke(app, ["schemes"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for name in list(SCHEMES) + list(POOLERS):
        assert name in result.output


def test_savings_reports_the_formula_ratio():
    result = runner.invoke(app, ["savings", "--scheme", "v4-csa", "--tokens", "131072"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    # raw K and V for 128 tokens + one shared K=V entry per 4 tokens (V4 stores the rotated entry once),
    # over K and V of 131072 tokens: (2*128 + 131072/4) / (2*131072) = 12.6%
    assert "12.6%" in result.output and "7.9x smaller" in result.output
    short = runner.invoke(app, ["savings", "--scheme", "v4-csa", "--tokens", "1"], env={"COLUMNS": "200"})
    assert "300.0%, 3.0x larger" in short.output and "smaller" not in short.output  # not "0.3x smaller"


def test_bad_input_is_a_clear_error_not_a_traceback():
    result = runner.invoke(app, ["savings", "--scheme", "v5"])
    assert result.exit_code == 2
    assert "unknown scheme 'v5'" in result.output
    assert "Traceback" not in result.output
    result = runner.invoke(app, ["savings", "--scheme", "tiny-4", "--local", "-3"])
    assert result.exit_code == 2


def test_engine_demo_runs_and_reports_cache_savings():
    result = runner.invoke(app, ["cache-demo", "--tokens", "256"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "v4-csa" in result.output and "vs full" in result.output


def test_train_cli_stops_resumes_and_reports(tmp_path):
    out = str(tmp_path / "run")
    common = [
        "train",
        "tiny-s4",
        "--set",
        "steps=6",
        "--set",
        "warm_start_steps=2",
        "--set",
        "eval_batches=1",
        "--set",
        "batch_size=8",
        "--out",
        out,
        "--no-progress",
    ]
    first = runner.invoke(app, [*common, "--stop-after", "3"], env={"COLUMNS": "200"})
    assert first.exit_code == 0, first.output
    again = runner.invoke(app, common, env={"COLUMNS": "200"})
    assert again.exit_code == 2 and "pass --resume" in again.output
    resumed = runner.invoke(app, [*common, "--resume"], env={"COLUMNS": "200"})
    assert resumed.exit_code == 0 and "held-out retrieval accuracy" in resumed.output
    bad = runner.invoke(app, ["train", "tiny-s4", "--set", "model.widht=3"], env={"COLUMNS": "200"})
    assert bad.exit_code == 2 and "unknown key" in bad.output


def test_recipes_lists_every_recipe():
    from phasescope.train.recipes import RECIPES

    result = runner.invoke(app, ["recipes"], env={"COLUMNS": "250"})
    assert result.exit_code == 0
    assert all(name in result.output for name in RECIPES)


def test_an_unusable_columns_and_a_pipe_still_print_whole_lines():
    """COLUMNS=0 (or a typo) made rich print nothing; an error piped into a log is one line,
    not wrapped at 80 columns mid-sentence."""
    import os
    import subprocess
    import sys

    def run(*args, columns):
        env = {**os.environ, "COLUMNS": columns}
        return subprocess.run([sys.executable, "-m", "phasescope", *args], capture_output=True, text=True, env=env)

    for columns in ("0", "x"):
        shown = run("savings", "--scheme", "v4-csa", "--tokens", "131072", columns=columns)
        assert shown.returncode == 0 and "12.6%" in shown.stdout
    missing = "a/path/long/enough/that/the/error/would/not/fit/in/eighty/columns/without/wrapping/it/somewhere"
    error = run("analyze", missing, columns="80")
    lines = [line for line in error.stdout.splitlines() if line.strip()]
    assert error.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ") and missing in lines[0]
