"""The typed sweep: one mapping from option names to specs (``sweep_settings``), shared by the
command line and ``phasescope.sweep``, and one reproducing command (``SweepSpec.to_argv``)
that the command line reads back into the same spec."""

from dataclasses import replace
from pathlib import Path

import pytest
import typer

import phasescope
import phasescope.api
from phasescope.cli import app
from phasescope.cli.sweep import sweep_specs
from phasescope.errors import InputError
from phasescope.specs import OPTION_SECTION, BackendOptions, RunOptions, SweepSpec, sweep_settings

NON_DEFAULT = {
    "probe": "haystack",
    "design": "pad-prefix",
    "depth": 0.25,
    "kv_gaps": (0, 3),
    "context_tokens": 900,
    "pair_format": "arrow",
    "filler": "lorem",
    "chat_template": True,
    "step": 4,
    "align": 1,
    "window": 8,
    "local": 64,
    "offsets": (0, 2, 5, 7, 9, 11, 13, 20),
    "samples": 12,
    "seed": 3,
    "phase_ensemble": True,
    "ensemble_pad_id": 7,
    "dtype": "bfloat16",
    "compress": "mean:s=4,w=8,L=64",
    "tokenizer": "deepseek-v4",
    "out": Path("runs/x"),
    "batch_size": 5,
    "prefix_reuse": False,
}


def parsed_by_the_command_line(argv: list[str]) -> dict:
    """The values `phasescope sweep ARGV` would run with (parsed, nothing run)."""
    command = typer.main.get_command(app).commands["sweep"]
    return command.make_context("sweep", list(argv)).params


def test_every_option_lands_in_its_spec():
    spec, run = sweep_settings("runs/s4", **NON_DEFAULT)
    assert spec.probe.name == "haystack" and spec.probe.kv_gaps == (0, 3) and spec.probe.depth == 0.25
    assert (spec.geometry.step, spec.geometry.align, spec.geometry.window, spec.geometry.local) == (4, 1, 8, 64)
    assert spec.offsets == NON_DEFAULT["offsets"] and (spec.samples, spec.seed) == (12, 3)
    assert spec.remedies.phase_ensemble and spec.remedies.ensemble_pad_id == 7
    assert (spec.backend.dtype, spec.backend.tokenizer) == ("bfloat16", "deepseek-v4")
    assert run == RunOptions(Path("runs/x"), 5, False, False, False)


def test_the_reproducing_command_reads_back_into_the_same_spec():
    spec, run = sweep_settings("runs/s4", **NON_DEFAULT)
    again, run_again = sweep_specs(parsed_by_the_command_line(spec.to_argv(run)))
    assert again == spec
    assert replace(run_again, progress=False) == run  # the command line shows a bar; Python does not


def test_defaults_agree_between_the_command_line_and_python():
    from_cli = sweep_specs(parsed_by_the_command_line(["--model", "runs/s4", "--out", "runs/x"]))
    assert from_cli == sweep_settings("runs/s4", out="runs/x", progress=True)
    assert from_cli[0] == SweepSpec("runs/s4")


def test_an_unknown_option_is_refused_with_the_closest_name():
    with pytest.raises(InputError, match="'kv_gap' is not a sweep option; did you mean 'kv_gaps'"):
        sweep_settings("runs/s4", kv_gap=(0, 1))
    with pytest.raises(InputError, match="not a sweep option"):
        phasescope.sweep(lambda ids: ids, zzz=1)


def test_every_option_name_belongs_to_one_spec():
    assert set(OPTION_SECTION.values()) == {"sweep", "probe", "geometry", "remedies", "backend", "run"}
    assert OPTION_SECTION["probe"] == "probe" and OPTION_SECTION["batch_size"] == "run"


def test_python_keywords_reach_the_specs(monkeypatch):
    seen = {}

    def capture(spec, run, **inputs):
        seen.update(spec=spec, run=run, **inputs)

    monkeypatch.setattr(phasescope.api, "sweep_spec", capture)
    backend = BackendOptions(dtype="float16")
    phasescope.sweep("hf:some/dir", "haystack", step=4, offsets=range(8), tokenizer="qwen3", options=backend)
    spec = seen["spec"]
    assert spec.model == "hf:some/dir" and spec.probe.name == "haystack" and spec.offsets == tuple(range(8))
    assert spec.backend == BackendOptions(dtype="float16", tokenizer="qwen3")  # a name is how the model loads
    assert seen["tokenizer"] is None
    phasescope.sweep(Path("runs/s4"), include_path=Path("tasks"))
    assert seen["spec"].model == "runs/s4" and seen["spec"].probe.include_path == "tasks"


def test_every_command_line_option_is_a_spec_field():
    """A new option is a spec field and a row of SWEEP_OPTIONS; nothing maps it by hand."""
    from phasescope.cli.sweep import SWEEP_OPTIONS

    assert set(SWEEP_OPTIONS) - set(OPTION_SECTION) == {"model"}
    assert set(OPTION_SECTION) - set(SWEEP_OPTIONS) == {"backoff"}  # Python only: retry timing of served models


def test_lists_and_ranges_from_python_become_the_same_spec():
    from phasescope.specs import ProbeSpec

    assert SweepSpec("m", offsets=range(8)) == SweepSpec("m", offsets=tuple(range(8)))
    assert ProbeSpec(kv_gaps=[0, 1]) == ProbeSpec(kv_gaps=(0, 1))
    hash(SweepSpec("m", probe=ProbeSpec(kv_gaps=[0, 1]), offsets=[0, 1, 2, 3, 4, 5, 6, 7]))  # frozen: hashable
