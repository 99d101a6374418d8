"""The typed sweep: one mapping from option names to specs (``sweep_settings``), shared by the
command line and ``phasescope.sweep``, and one reproducing command (``SweepSpec.to_argv``)
that the command line reads back into the same spec."""

import importlib
import json
from dataclasses import replace
from pathlib import Path

import pytest
import typer

import phasescope
import phasescope.api
from phasescope.backends.hf import Options as HFOptions
from phasescope.backends.native import Options as NativeOptions
from phasescope.cli import app
from phasescope.cli.sweep import sweep_specs
from phasescope.errors import InputError
from phasescope.probes import PROBES, probe_spec
from phasescope.run.settings import option_sections, sweep_settings
from phasescope.rundir import LEGACY_PROBE_DEFAULTS as LEGACY_PROBE
from phasescope.specs import RunOptions, SweepSpec

OPTION_SECTION = option_sections()

NON_DEFAULT = {
    "probe": "kv-retrieval",
    "design": "pad-prefix",
    "depth": 0.25,
    "kv_gaps": (0, 3),
    "context_tokens": 900,
    "pair_format": "codes",
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


MODEL = "hf:models/x"  # the backend with the most options of its own


def test_every_option_lands_in_its_spec():
    spec, run = sweep_settings(MODEL, **NON_DEFAULT)
    options = spec.probe.options
    assert spec.probe.name == "kv-retrieval" and options.kv_gaps == (0, 3) and options.depth == 0.25
    assert (spec.geometry.step, spec.geometry.align, spec.geometry.window, spec.geometry.local) == (4, 1, 8, 64)
    assert spec.offsets == NON_DEFAULT["offsets"] and (spec.samples, spec.seed) == (12, 3)
    assert spec.remedies.phase_ensemble and spec.remedies.ensemble_pad_id == 7
    assert (spec.backend.dtype, spec.backend.tokenizer) == ("bfloat16", "deepseek-v4")
    assert spec.backend.compress == NON_DEFAULT["compress"]
    assert run == RunOptions(Path("runs/x"), 5, False, False, False)


def test_the_reproducing_command_reads_back_into_the_same_spec():
    spec, run = sweep_settings(MODEL, **NON_DEFAULT)
    again, run_again = sweep_specs(parsed_by_the_command_line(spec.to_argv(run)))
    assert again == spec
    assert replace(run_again, progress=False) == run  # the command line shows a bar; Python does not


def test_defaults_agree_between_the_command_line_and_python():
    from_cli = sweep_specs(parsed_by_the_command_line(["--model", "runs/s4", "--out", "runs/x"]))
    assert from_cli == sweep_settings("runs/s4", out="runs/x", progress=True)
    assert from_cli[0] == replace(SweepSpec("runs/s4"), probe=probe_spec("kv-retrieval", {}), backend=NativeOptions())


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
    backend = HFOptions(dtype="float16")
    phasescope.sweep("hf:some/dir", "kv-retrieval", step=4, offsets=range(8), tokenizer="qwen3", options=backend)
    spec = seen["spec"]
    assert spec.model == "hf:some/dir" and spec.probe.name == "kv-retrieval" and spec.offsets == tuple(range(8))
    assert spec.backend == HFOptions(dtype="float16", tokenizer="qwen3")  # a name is how the model loads
    assert seen["tokenizer"] is None
    phasescope.sweep(Path("runs/s4"), "lm-eval:t", include_path=Path("tasks"))
    assert seen["spec"].model == "runs/s4" and seen["spec"].probe.options.include_path == "tasks"


def test_every_command_line_option_is_a_spec_field():
    """A new option is a spec field and a row of SWEEP_OPTIONS; nothing maps it by hand."""
    from phasescope.cli.sweep import SWEEP_OPTIONS

    assert set(SWEEP_OPTIONS) - set(OPTION_SECTION) == {"model"}
    assert set(OPTION_SECTION) == set(SWEEP_OPTIONS) - {"model"}


def test_lists_and_ranges_from_python_become_the_same_spec():
    assert SweepSpec("m", offsets=range(8)) == SweepSpec("m", offsets=tuple(range(8)))
    assert probe_spec("kv-retrieval", {"kv_gaps": [0, 1]}) == probe_spec("kv-retrieval", {"kv_gaps": (0, 1)})
    probe = probe_spec("kv-retrieval", {"kv_gaps": range(2)})
    hash(SweepSpec("m", probe=probe, offsets=[0, 1, 2, 3, 4, 5, 6, 7]))  # frozen: hashable


def test_the_legacy_layout_holds_options_of_today_at_their_defaults():
    """What spec.json recorded before each probe owned its options: every probe's option of that
    release, at the defaults the options still have (options added since, e.g. --single-run, are
    filled in at their defaults by ``upgrade_spec``)."""
    from phasescope.probes import declared_options

    declared = {
        n: list(f.default) if isinstance(f.default, tuple) else f.default for n, f in declared_options().items()
    }
    assert {name: declared[name] for name in LEGACY_PROBE} == LEGACY_PROBE


def test_a_kv_retrieval_run_written_before_probes_owned_their_options_resumes(tmp_path):
    """spec.json of the previous release records every probe's options; a run made then resumes,
    and a real difference in one of its own options is still refused."""
    from phasescope.train.shipped import DEMO

    model, run = str(DEMO / "tiny-s4"), tmp_path / "run"
    common = dict(samples=2, offsets=range(8), out=run)
    first = phasescope.sweep(model, kv_gaps=(0, 1), **common)
    spec = json.loads((run / "spec.json").read_text())
    own = spec["sweep"]["probe"]
    spec["sweep"]["probe"] = {"name": own["name"]} | LEGACY_PROBE | {k: v for k, v in own.items() if k != "name"}
    (run / "spec.json").write_text(json.dumps(spec))
    again = phasescope.sweep(model, kv_gaps=(0, 1), **common)
    assert again.scored == 0 and len(again.records) == len(first.records)
    with pytest.raises(InputError, match=r"holds a different sweep .*sweep\.probe\.kv_gaps: \[0, 1\] in the run"):
        phasescope.sweep(model, kv_gaps=(0, 2), **common)


@pytest.mark.parametrize("kind", sorted(PROBES))
def test_every_probes_legacy_spec_reads_as_its_own_options(kind):
    """For every registered probe, the old layout (every probe's option, the others at their
    defaults) reads as the probe's own options; another probe's option at a non-default value
    stays, and so is a difference a resume refuses."""
    from phasescope.probes import options_class
    from phasescope.rundir import upgrade_spec

    module = importlib.import_module(PROBES[kind])
    name = f"{kind}:x" if hasattr(module, "ARGUMENT") else kind
    defaults = options_class(module)().to_json()
    current = {"name": name} | defaults
    legacy = {"name": name} | LEGACY_PROBE | defaults
    saved = {"probe": {"probe": kind}, "sweep": {"model": "m", "probe": legacy}}
    assert upgrade_spec(saved, defaults)["sweep"]["probe"] == current
    odd = next(k for k in LEGACY_PROBE if k not in defaults) if set(LEGACY_PROBE) - set(defaults) else None
    if odd is not None:
        saved["sweep"]["probe"][odd] = "something else"
        assert upgrade_spec(saved, defaults)["sweep"]["probe"][odd] == "something else"


def test_a_probe_option_added_since_reads_as_its_default_in_an_older_run():
    """A padding-completion run written before --single-run existed (its probe section without
    the key) reads as this version would have written it: the run did not use the option."""
    from phasescope.probes import options_class, probe_module
    from phasescope.rundir import upgrade_spec

    defaults = options_class(probe_module("padding-completion"))().to_json()
    older = {"name": "padding-completion"} | {k: v for k, v in defaults.items() if k != "single_run"}
    saved = {"probe": {"probe": "padding-completion"}, "sweep": {"model": "m", "probe": older}}
    assert upgrade_spec(saved, defaults)["sweep"]["probe"] == {"name": "padding-completion"} | defaults
    assert defaults["single_run"] is False


def test_a_run_whose_probe_description_lacks_a_parameter_added_since_resumes(tmp_path):
    """spec.json's top-level ``probe`` (``Probe.spec()``) was compared raw: a parameter the probe
    gained since the run was made (here: its key deleted, as a run from before it existed)
    refused every resume, even with the parameter at its default (#45 part 1). A missing key now
    reads as the parameter's declared default; a real difference is still refused."""
    from phasescope.train.shipped import DEMO

    model, run = str(DEMO / "tiny-s4"), tmp_path / "run"
    common = dict(samples=2, offsets=range(8), out=run)
    first = phasescope.sweep(model, **common)
    spec = json.loads((run / "spec.json").read_text())
    for key in ("kv_gaps", "n_distractors", "design"):
        del spec["probe"][key]
    (run / "spec.json").write_text(json.dumps(spec))
    again = phasescope.sweep(model, **common)
    assert again.scored == 0 and len(again.records) == len(first.records)
    del spec["sweep"]["probe"]["kv_gaps"]  # an older typed section too: the missing gap is the default
    (run / "spec.json").write_text(json.dumps(spec))
    with pytest.raises(InputError, match=r"holds a different sweep .*kv_gaps: \[0\] in the run, \[0, 1\] now"):
        phasescope.sweep(model, kv_gaps=(0, 1), **common)


def test_a_served_models_geometry_says_the_server_does_not_declare_it():
    """'labels only: the model is not compressed' was printed for a served model given --step 4 --local 8
    (#59): a server does not say how it compresses its cache; a model without compression is another case."""
    from phasescope.specs import SERVED, Geometry, GeometryOverrides, ModelGeometry

    served = Geometry.resolve(ModelGeometry(source=SERVED), GeometryOverrides(step=4, local=8)).describe()
    assert "a served model does not say how it compresses its cache" in served and "not compressed" not in served
    plain = Geometry.resolve(ModelGeometry(), GeometryOverrides(step=4)).describe()
    assert "labels only: the model is not compressed" in plain
