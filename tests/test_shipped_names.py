"""Shipped models by name (#46 part 6): `--model demo:tiny-s4` works from any directory, where a
path into the source tree worked only inside the repository."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import phasescope
from phasescope.cli import app
from phasescope.errors import InputError
from phasescope.shipped import DEMO, expand

runner = CliRunner()


def test_a_shipped_name_is_the_spec_that_loads_it():
    assert expand("demo:tiny-s4") == str(DEMO / "tiny-s4")
    assert expand("demo:deepseek-v4-tiny") == f"hf:{DEMO / 'deepseek-v4-tiny'}"  # a transformers export
    assert expand("hf:demo:deepseek-v4-tiny") == f"hf:{DEMO / 'deepseek-v4-tiny'}"
    assert expand("runs/my-model") == "runs/my-model" and expand("hf:models/x") == "hf:models/x"
    for wrong in ("demo:nope", "demo:", "demo:../demo/tiny-s4"):
        with pytest.raises(
            InputError, match="phasescope ships no model .* it ships deepseek-v4-text, deepseek-v4-tiny, tiny-full"
        ):
            expand(wrong)


def test_a_sweep_by_name_from_another_directory_equals_the_sweep_by_path(tmp_path, monkeypatch):
    by_path = phasescope.sweep(str(DEMO / "tiny-s4"), samples=2, offsets=range(8))
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["sweep", "--model", "demo:tiny-s4", "--samples", "2", "--offsets", "0:8",
                                 "--out", "run", "--no-progress"])  # fmt: skip
    assert result.exit_code == 0, result.output
    by_name = phasescope.sweep("demo:tiny-s4", samples=2, offsets=range(8), out=tmp_path / "run")
    assert by_name.scored == 0  # the command line's run, resumed: the same sweep of the same weights
    assert [(r.key, r.correct, r.logprob_target) for r in by_name.records] == [
        (r.key, r.correct, r.logprob_target) for r in by_path.records
    ]
