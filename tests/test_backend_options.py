"""Every registered backend owns its load options (issue #31): each option has help and one
meaning per name, another backend's option is refused by the flag that gave it, the reproducing
command reads back into the same options, the command line offers every option, and a run
directory written before backends owned their options (spec.json's backend section held dtype,
compress and tokenizer whatever the backend) resumes. A new backend is covered without a line of
test code."""

import json
from dataclasses import fields

import pytest
import typer

import phasescope
from phasescope.backends import BACKENDS, backend_options, declared_options, kind, options_class
from phasescope.backends.options import BackendOptions, CallableOptions
from phasescope.cli import app
from phasescope.cli.sweep import SWEEP_OPTIONS, sweep_specs
from phasescope.errors import InputError
from phasescope.run.settings import sweep_settings
from phasescope.rundir import LEGACY_BACKEND_KEYS, upgrade_spec

KINDS = sorted(BACKENDS) + ["python"]


def a_value_other_than(declared):
    """A valid value off the declared default (what a user could pass)."""
    special = {
        "dtype": "bfloat16",
        "device": "meta",
        "compress": "mean:s=4",
        "tokenizer": "qwen3",
        "answers": "generation",
    }
    if declared.name in special:
        return special[declared.name]
    default = declared.default
    if isinstance(default, bool):
        return not default
    if isinstance(default, int | float):
        return default + 1
    return "OTHER_VAR"


@pytest.mark.parametrize("name", KINDS)
def test_every_option_has_help_and_the_options_class_is_a_backend_options(name):
    cls = options_class(name)
    assert issubclass(cls, BackendOptions)
    for f in fields(cls):
        assert len(f.metadata["help"]) > 20, f"{name}: --{f.name} needs help text"
        assert f.metadata["panel"], f"{name}: --{f.name} needs a --help panel"


def test_a_name_several_backends_declare_has_one_meaning():
    """--tokenizer is one option on the command line: every backend that has it declares it alike."""
    for option_name, first in declared_options().items():
        for name in KINDS:
            mine = {f.name: f for f in fields(options_class(name))}.get(option_name)
            if mine is not None:
                assert (mine.default, dict(mine.metadata)) == (first.default, dict(first.metadata)), option_name


@pytest.mark.parametrize("name", KINDS)
def test_another_backends_option_is_refused_by_its_flag(name):
    own = {f.name for f in fields(options_class(name))}
    others = [f for option_name, f in declared_options().items() if option_name not in own]
    assert others, "every backend lacks some other backend's option"
    for declared in others:
        flag = "--" + declared.name.replace("_", "-")
        with pytest.raises(InputError, match=f"^{flag}: not an option of "):
            backend_options(name, {declared.name: a_value_other_than(declared)})
        assert backend_options(name, {declared.name: declared.default}) == options_class(name)()  # the CLI's


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_every_option_off_its_default_reads_back_from_the_reproducing_command(name):
    given = {f.name: a_value_other_than(f) for f in fields(options_class(name))}
    spec, run = sweep_settings(kind(name).EXAMPLE, out="runs/x", **given)
    assert spec.backend == options_class(name)(**given)
    command = typer.main.get_command(app).commands["sweep"]
    again, _ = sweep_specs(command.make_context("sweep", spec.to_argv(run)).params)
    assert again.backend == spec.backend


def test_the_command_line_offers_every_backends_option_in_a_panel():
    for option_name in declared_options():
        assert option_name in SWEEP_OPTIONS, f"--{option_name} is not a `phasescope sweep` option"
    for name in BACKENDS:
        assert kind(name).Options.__module__ == kind(name).__name__  # the backend's own module declares them


def test_a_bad_value_is_refused_naming_its_flag():
    with pytest.raises(InputError, match="--dtype 'float8'"):
        backend_options("hf", {"dtype": "float8"})
    with pytest.raises(InputError, match="--compress 'max:s=4'"):
        backend_options("hf", {"compress": "max:s=4"})
    with pytest.raises(InputError, match="--concurrency >= 1"):
        backend_options("openai", {"concurrency": 0})
    with pytest.raises(
        InputError, match="are the options of phasescope model directories; got phasescope.backends.hf.Options"
    ):
        backend_options("phasescope", {}, options_class("hf")())


def test_a_python_callable_takes_a_tokenizer_only():
    assert [f.name for f in fields(CallableOptions)] == ["tokenizer"]
    with pytest.raises(InputError, match="--dtype: not an option of Python callables"):
        phasescope.sweep(lambda ids: ids, step=4, dtype="bfloat16")


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_the_legacy_backend_section_reads_as_the_backends_own_options(name):
    """Before #31 spec.json's backend section held dtype, compress and tokenizer for every backend."""
    own = options_class(name)().to_json()
    legacy = dict.fromkeys(LEGACY_BACKEND_KEYS) | {"dtype": "float32", "compress": "none"} | own
    saved = {"sweep": {"model": kind(name).EXAMPLE, "backend": legacy}}
    assert upgrade_spec(saved, backend=own)["sweep"]["backend"] == own
    assert upgrade_spec({"sweep": {"model": "m", "backend": {}}}, backend=own)["sweep"]["backend"] == own


def test_a_run_written_before_backends_owned_their_options_resumes(tmp_path):
    """A phasescope model's run as the previous release wrote it (compress: none recorded) resumes;
    a real difference in a model option is still refused."""
    from phasescope.train.shipped import DEMO

    model, run = str(DEMO / "tiny-s4"), tmp_path / "run"
    common = dict(samples=2, offsets=range(8), out=run)
    first = phasescope.sweep(model, **common)
    spec = json.loads((run / "spec.json").read_text())
    assert spec["sweep"]["backend"] == {"dtype": "float32", "tokenizer": None}
    spec["sweep"]["backend"] = {"dtype": "float32", "compress": "none", "tokenizer": None}
    (run / "spec.json").write_text(json.dumps(spec))
    again = phasescope.sweep(model, **common)
    assert again.scored == 0 and len(again.records) == len(first.records)
    with pytest.raises(InputError, match=r"holds a different sweep .*sweep\.backend\.dtype: \"float32\" in the run"):
        phasescope.sweep(model, dtype="bfloat16", **common)


def test_the_options_that_change_the_logits_are_read_from_their_declarations():
    """The weights fingerprint's suffix is every option declared logits=True off its default, as the
    hand-kept list (hf: dtype then compress; phasescope: dtype) spelled it, so older manifests still
    match; an option a contributor declares so joins it with no other edit (#45)."""
    from dataclasses import dataclass

    from phasescope.backends import hf, native
    from phasescope.backends.options import model_option
    from phasescope.options import behaviour

    assert behaviour(hf.Options()) == "" and behaviour(native.Options(device="cpu", tokenizer="qwen3")) == ""
    moved = hf.Options(dtype="bfloat16", compress="mean:s=4", device="cpu", trust_remote_code=True)
    assert behaviour(moved) == "+dtype:bfloat16+compress:mean:s=4"
    assert behaviour(native.Options(dtype="float16")) == "+dtype:float16"

    @dataclass(frozen=True)
    class WithQuant(native.Options):
        quant: str = model_option("none", "Weight quantization.", measured=True, logits=True)

    assert behaviour(WithQuant(quant="int8")) == "+quant:int8"
    with pytest.raises(ValueError, match="measured"):
        model_option("none", "A logits option left out of spec.json.", logits=True)
