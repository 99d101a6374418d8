"""The layers of docs/design.md hold: no module imports a layer above its own, there are no
import cycles, and reading results (`phasescope analyze`, `report`, `compare`) never loads torch.

The import graph is read from the source with ``ast``; function-level imports count like any
other. Imports under ``if TYPE_CHECKING:`` do not run: they are left out of the layer and torch
checks, but a cycle through one is still a cycle (the layout would not survive making it real).
"""

import ast
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
# bottom to top: a package may import itself and the packages before it
ORDER = [
    "errors",
    "version",
    "validation",
    "shipped",  # the shipped models by name (demo:tiny-s4)
    "limits",
    "options",
    "phases",  # the factors a compression boundary can act on (needle, prompt end, distance), declared once
    "designs",  # the sweep designs: where each puts the needle and the prompt end
    "specs",
    "rundir",  # the run directory: its files (atomic writes), records, metrics and RunDir
    "theory",
    "kv",
    "data",
    "model",
    "probes",
    "backends",
    "run",
    "train",
    "analysis",
    "reporting",
    "gate",  # the paired comparison as a CI gate: pass/fail, JUnit XML, Markdown, reproducers
    "results",
    "export",
    "assemble",  # a typed sweep to a loaded model, its geometry and its probe (the CLI's and the API's)
    "api",
    "check",  # phasescope check: the reference's and the stack's sweeps, a shuffled repeat, the gate
    "replay",  # phasescope replay: one reproducer sent again
    "scale",  # a sweep split into parts (--shard), merged exactly, run on a Ray cluster
    "phasescope",  # the package facade: lazy re-exports of api
    "lm_eval_plugin",
    "lm_eval_model",
    "engine_demo",
    "demo",
    "inspect",
    "reproduce",
    "cli",
    "__main__",
]
TORCH_FREE = {
    "errors", "version", "validation", "shipped", "limits", "options", "phases", "designs", "specs", "rundir",
    "analysis", "reporting", "gate", "results",
}  # fmt: skip


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runtime_imports(tree: ast.AST, typing_too: bool = False):
    """Import nodes that run (not under ``if TYPE_CHECKING:``; with ``typing_too``, those as well)."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING":
            skipped |= {id(n) for n in ast.walk(node)}
    if typing_too:
        skipped = set()
    return [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in skipped]


def graph(typing_too: bool = False) -> dict[str, set[str]]:
    modules = {module_name(p): p for p in (SRC / "phasescope").rglob("*.py")}
    edges = defaultdict(set)
    for name, path in modules.items():
        for node in runtime_imports(ast.parse(path.read_text()), typing_too):
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                targets = [a.name for a in getattr(node, "names", [])]
            edges[name] |= {t for t in targets if t in modules and t != name}
    return edges


def package(module: str) -> str:
    parts = module.split(".")
    if parts[-1] == "__main__":
        return "__main__"  # an entry point (`python -m phasescope.train`) sits on top, like the CLI
    return parts[1] if len(parts) > 1 else "phasescope"


HEAVY_LIBRARIES = {"torch", "transformers", "safetensors"}


def loads_a_model_library() -> set[str]:
    """Modules whose imports (their own or their imports', transitively) reach torch or transformers."""
    edges = graph()
    loads = set()
    for path in (SRC / "phasescope").rglob("*.py"):
        for node in runtime_imports(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            if any(n.split(".")[0] in HEAVY_LIBRARIES for n in names):
                loads.add(module_name(path))
    grown = True
    while grown:
        grown = False
        for module, targets in edges.items():
            if module not in loads and targets & loads:
                loads.add(module)
                grown = True
    return loads


def test_every_package_is_placed_in_a_layer():
    assert {package(m) for m in graph()} <= set(ORDER)


def test_no_module_imports_a_layer_above_its_own():
    upward = [
        f"{a} -> {b}"
        for a, targets in graph().items()
        for b in targets
        if ORDER.index(package(b)) > ORDER.index(package(a))
    ]
    assert upward == []


def test_results_layers_import_nothing_that_loads_a_model():
    heavy = loads_a_model_library()
    assert heavy, "the check sees torch imports at all"
    offending = [
        f"{a} -> {b}" for a, targets in graph().items() for b in targets if package(a) in TORCH_FREE and b in heavy
    ]
    assert offending == []


def test_there_are_no_import_cycles():
    edges = graph(typing_too=True)
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            # a package's own __init__ re-exporting its submodules is the one allowed loop
            if nxt == node.rsplit(".", 1)[0]:
                continue
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    assert cycles == []


@pytest.fixture
def run_dir(tmp_path):
    """A finished sweep's run directory, written by hand (no model involved)."""
    records = [
        {"content_id": c, "offset": d, "phase": d % 4, "step": 4, "align": 0, "correct": (c + d) % 3 > 0,
         "logprob_target": -0.5 if (c + d) % 3 else -1.5,
         "logprobs": {"right": -0.5, "wrong": -1.5} if (c + d) % 3 else {"right": -1.5, "wrong": -0.5},
         "variant": 0, "target": "right"}
        for c in range(12)
        for d in range(8)
    ]  # fmt: skip
    (tmp_path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "spec.json").write_text(json.dumps({"seed": 0, "step": 4, "offsets": list(range(8)), "samples": 12}))
    return tmp_path


@pytest.mark.parametrize("command", ["analyze", "report", "compare"])
def test_reading_results_never_loads_torch(run_dir, command):
    """The Python API and the command line alike (checked in a fresh interpreter)."""
    calls = {
        "analyze": f"phasescope.analyze({str(run_dir)!r}, n_resamples=100)",
        "report": f"phasescope.report({str(run_dir)!r})",
        "compare": f"phasescope.compare([{str(run_dir)!r}], {str(run_dir / 'cmp')!r})",
    }
    argv = ["phasescope", "analyze", str(run_dir), "--resamples", "100"]
    cli = f"sys.argv = {argv!r}\ntry:\n    app()\nexcept SystemExit:\n    pass"
    code = "\n".join(
        ["import sys", "import phasescope", calls[command], "from phasescope.cli import app", cli]
        + ["print('torch' in sys.modules)"]
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False", out.stdout[-2000:]


def test_run_directory_file_names_are_spelled_in_one_module():
    """Every file a run directory holds (spec.json, manifest.json, records.jsonl, metrics.json,
    report.html, .lock, samples.jsonl, figures/, the sections other commands add, a comparison's
    pages, the lm-eval export) is spelled as a path component only in phasescope/rundir/__init__.py
    (``RunDir`` and its names); everything else reaches them through it, so renaming or adding a run
    file is one edit."""
    names = {"spec.json", "manifest.json", "records.jsonl", "metrics.json", "report.html", ".lock", "samples.jsonl",
             "figures", "ablation.json", "preferences.json", "theory.json", "preferences.png", "compare.html",
             "paired.json", "lm_eval_results.json", "protocol.jsonl", "gate.json", "junit.xml", "summary.md",
             "check.json"}  # fmt: skip
    spelled = [
        f"{path.relative_to(SRC)}:{node.lineno} {node.value}"
        for path in (SRC / "phasescope").rglob("*.py")
        # shipped.py: a shipped checkpoint's manifest, not a run's
        if path.relative_to(SRC).as_posix() not in ("phasescope/rundir/__init__.py", "phasescope/train/shipped.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and node.value in names
    ]
    assert not spelled, spelled
