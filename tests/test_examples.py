"""Every Python example in README.md and docs/*.md runs as written, each in a fresh directory
where `runs/s4` is a trained model (the docs' convention: `phasescope train ... --out runs/s4`;
here a copy of the shipped tiny-s4). An example that needs a name it does not define fails
here, not in a reader's session."""

import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def examples() -> list[tuple[str, str]]:
    out = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for number, match in enumerate(FENCE.finditer(path.read_text()), start=1):
            out.append((f"{path.relative_to(ROOT)}#{number}", match.group(1)))
    return out


EXAMPLES = examples()


def test_the_docs_have_python_examples():
    assert len(EXAMPLES) >= 5 and any(name.startswith("README.md") for name, _ in EXAMPLES)


@pytest.mark.parametrize(("name", "code"), EXAMPLES, ids=[name for name, _ in EXAMPLES])
def test_every_python_example_runs_as_written(name, code, tmp_path, monkeypatch):
    from phasescope.demo import ASSETS

    shutil.copytree(ASSETS / "tiny-s4", tmp_path / "runs" / "s4")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, name, "exec"), {"__name__": "__main__"})
