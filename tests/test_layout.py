"""The size limits issue #20 set on the layers a change most often touches: no function in cli/,
api, run/, backends/ or probes/ over 60 lines; the sweep command and phasescope.sweep hold no
logic of their own (30 lines at most; the option table and run.settings.sweep_settings do the work)."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "phasescope"
LIMITED = ["cli", "api.py", "run", "backends", "probes"]


def functions(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node.end_lineno - node.lineno + 1


def test_no_function_in_the_limited_layers_is_over_60_lines():
    paths = [p for name in LIMITED for p in ([SRC / name] if name.endswith(".py") else (SRC / name).rglob("*.py"))]
    assert len(paths) > 20  # the walk sees the packages
    long = [f"{p.relative_to(SRC)}:{name} ({n} lines)" for p in paths for name, n in functions(p) if n > 60]
    assert long == []


def test_the_sweep_entry_points_are_at_most_30_lines():
    assert dict(functions(SRC / "api.py"))["sweep"] <= 30
    assert dict(functions(SRC / "cli" / "sweep.py"))["sweep"] <= 30
