"""The README shows what `make demo` prints (docs/design.md, 'Conventions': README output is pasted from a real run)."""

import re
from pathlib import Path

from typer.testing import CliRunner

from phasescope.cli import app

README = Path(__file__).resolve().parents[1] / "README.md"


def _demo_block() -> list[str]:
    text = README.read_text()
    block = text.split("This is its output here:\n\n```\n", 1)[1].split("```", 1)[0]
    return _comparable(block)


def _comparable(output: str) -> list[str]:
    """Lines that do not depend on the machine: no progress bars, no timing."""
    lines = []
    for line in output.splitlines():
        if not line.strip() or "demo finished in" in line or re.search(r"sweep .*━|\d+/\d+|^\s*rec/s\s*$", line):
            continue
        lines.append(line.rstrip())
    return lines


def test_readme_demo_output_is_what_the_demo_prints(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the demo's default --out runs/demo, as `make demo` runs it
    result = CliRunner().invoke(app, ["demo"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert _comparable(result.output) == _demo_block()
