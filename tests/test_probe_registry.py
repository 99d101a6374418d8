"""Every registered probe, built by its registry entry, places the anchor at base + d for every
offset d and every design it takes (issue #20: a new probe is one module and one registry line;
this test then covers it, or fails naming what it needs)."""

import importlib
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from phasescope.data.retrieval import RetrievalTask
from phasescope.designs import DESIGN_MOVES, DESIGNS
from phasescope.errors import InputError
from phasescope.probes import PROBES, build_probe, declared_options, inputs, options_class, probe_module, probe_spec
from phasescope.probes.base import ProbeContext, ProbeError, judge
from phasescope.probes.options import ProbeOptions
from phasescope.specs import Geometry

TASK = RetrievalTask(
    n_keys=32, n_values=32, n_filler=8, n_pairs=16, n_queries=8, max_gap=2, min_distance=8, seq_len=128
)
ROOT = Path(__file__).resolve().parents[1]
OFFSETS = list(range(8))
GEOMETRY = Geometry(step=4, window=4, align=0, local=8, source="test")
# what a probe named NAME:ARGUMENT is given here, and the options it needs (lm-eval: local YAML tasks)
ARGUMENTS = {
    "prompts": ("examples/prompts.jsonl", {}),
    "lm-eval": ("ps_capitals", {"include_path": "tests/data/lm_eval"}),  # the first 3 documents: one task
}


def cases() -> list[tuple[str, str, bool]]:
    """(probe, design, text) for every registered probe, every design it takes and every input it
    declares (``INPUTS``: text, with a tokenizer; ids, a native model's task: text False)."""
    out = []
    for name in PROBES:
        module = probe_module(f"{name}:x" if name in ARGUMENTS else name)
        designs = DESIGNS if "design" in own_options(module) else ("shift-needle",)
        out += [(name, design, kind == "text") for kind in inputs(module) for design in designs]
    return out


def own_options(module) -> set[str]:
    return {f.name for f in fields(options_class(module))}


def test_every_probe_with_an_argument_is_given_one_here():
    needs = [name for name in PROBES if hasattr(importlib.import_module(PROBES[name]), "ARGUMENT")]
    assert sorted(needs) == sorted(ARGUMENTS), "a new NAME:ARGUMENT probe: add its test argument to ARGUMENTS"


@pytest.fixture(scope="module")
def tokenizer(qwen3_tokenizer):
    return qwen3_tokenizer


@pytest.mark.parametrize(("name", "design", "text"), cases())
def test_each_registered_probe_puts_the_anchor_at_base_plus_the_offset(name, design, text, tokenizer, monkeypatch):
    monkeypatch.chdir(ROOT)  # the argument files and the lm-eval tasks' data are named from the repository root
    argument, options = ARGUMENTS.get(name, (None, {}))
    spec = probe_spec(f"{name}:{argument}" if argument else name, {"design": design, **options})
    if "kv_gaps" in own_options(probe_module(spec)) and design == "shift-needle":  # both renderings, at every offset
        spec = probe_spec(spec.name, {"design": design, "kv_gaps": (0, 1), **options})
    task = None if text else TASK
    ctx = ProbeContext(spec, GEOMETRY, tokenizer=tokenizer if text else None, task=task)
    items = build_probe(ctx).items(OFFSETS, 3, np.random.default_rng(0))

    # the position the design moves by the offset: the needle's, or the prompt end's (shift-end)
    moved = (lambda it: it.anchor_pos) if "needle" in DESIGN_MOVES[design] else (lambda it: it.answer_pos)
    base = {(it.content_id, it.variant): moved(it) for it in items if it.offset == 0}
    assert len(base) >= 3 and len(items) == len(base) * len(OFFSETS)
    for item in items:
        assert moved(item) == base[(item.content_id, item.variant)] + item.offset
        assert item.answer_pos == len(item.input_ids) and item.target in item.candidates
        right = {"greedy": True, "logprobs": {c: (0.0 if c == item.target else -5.0) for c in item.candidates}}
        wrong = {"greedy": False, "logprobs": {c: (-5.0 if c == item.target else 0.0) for c in item.candidates}}
        assert judge(item, right) and not judge(item, wrong)


def a_value_other_than(default):
    if isinstance(default, bool):
        return not default
    if isinstance(default, tuple):
        return (*default, 99)
    if isinstance(default, float):
        return default / 2
    return "x" if default is None or isinstance(default, str) else default + 1


@pytest.mark.parametrize("kind", sorted(PROBES))
def test_an_option_the_probe_does_not_read_is_refused_by_the_flag_given(kind):
    """Every probe refuses every other probe's option given a value, naming it as it was typed: a
    boolean turned off by its own flag (``--mixed-phase``) is named by that flag, not by its field;
    the same option at its default (the command line passes them all) is accepted."""
    argument, options = ARGUMENTS.get(kind, (None, {}))
    name = f"{kind}:{argument}" if argument else kind
    own = own_options(probe_module(name))
    others = {n: f for n, f in declared_options().items() if n not in own}
    if not others:
        pytest.skip(f"the {kind} probe reads every declared option")
    for option, declared in sorted(others.items()):
        value = a_value_other_than(declared.default)
        off = declared.metadata["off_flag"]
        flag = off if value is False and off else "--" + option.replace("_", "-")
        with pytest.raises(ProbeError, match=f"^{flag}: not used by the {kind} probe"):
            probe_spec(name, options | {option: value})
        assert probe_spec(name, options | {option: declared.default}).name == name


def test_every_probe_declares_its_options_with_help_and_one_meaning_per_name():
    """A probe's options are its module's Options (ProbeOptions fields with --help text); a name two
    probes share is one option (same default and help), so the command line has one flag for it."""
    seen = {}
    for name, module in [(n, importlib.import_module(path)) for n, path in PROBES.items()]:
        cls = options_class(module)
        assert issubclass(cls, ProbeOptions), f"{name}: Options must subclass probes.options.ProbeOptions"
        for f in fields(cls):
            assert f.metadata.get("help"), f"{name}: option {f.name} has no help"
            first = seen.setdefault(f.name, (name, f.default, f.metadata["help"]))
            assert first[1:] == (f.default, f.metadata["help"]), f"{f.name}: {name} and {first[0]} declare it apart"


def test_an_option_of_another_probe_given_at_its_default_is_refused_too():
    """The command line passes every option at its default, so a foreign option was refused only
    off its default: `--probe padding-completion --depth 0.5` passed silently while `--depth 0.3`
    was refused (#45 part 2). What the user typed, or gave the Python API, is refused at any value."""
    from typer.testing import CliRunner

    import phasescope
    from phasescope.cli import app

    typed = CliRunner().invoke(app, ["sweep", "--model", "demo:tiny-s4", "--probe", "padding-completion",
                                     "--depth", "0.5", "--out", "unused", "--dry-run"])  # fmt: skip
    assert typed.exit_code == 2 and "--depth: not used by the padding-completion probe; drop it" in typed.output
    with pytest.raises(InputError, match="--depth: not used by the padding-completion probe"):
        phasescope.sweep("demo:tiny-s4", probe="padding-completion", depth=0.5, samples=2)
    with pytest.raises(InputError, match="--compress: not an option of phasescope model directories"):
        phasescope.sweep("demo:tiny-s4", compress=None, samples=2)  # hf:'s option, at its default


def test_no_option_name_has_two_owners_and_shared_names_are_declared_alike():
    """#45 item 2: an option name belongs to one owner (the sweep, the probes, the backends,
    geometry, remedies, run), so option_sections cannot send it to the wrong spec; a name several
    probes (or several backends) share has one type and one default, so the first declaration,
    which the command line shows, stands for all of them."""
    from collections import defaultdict
    from dataclasses import fields

    from phasescope.backends import BACKENDS
    from phasescope.backends import declared_options as backend_declared
    from phasescope.backends import options_class as backend_options_class
    from phasescope.probes import declared_options as probe_declared
    from phasescope.probes import modules, options_class
    from phasescope.run.settings import SECTIONS

    owners = {"sweep": {"offsets", "samples", "seed", "probe"}, "backend": set(backend_declared())}
    owners |= {"probe options": set(probe_declared())}
    owners |= {section: {f.name for f in fields(cls)} for section, cls in SECTIONS}
    seen = defaultdict(list)
    for owner, names in owners.items():
        for name in names:
            seen[name].append(owner)
    assert {name: o for name, o in seen.items() if len(o) > 1} == {}
    classes = [options_class(m) for _, m in modules()], [backend_options_class(n) for n in BACKENDS]
    for group in classes:
        declared = defaultdict(set)
        for cls in group:
            for f in fields(cls):
                declared[f.name].add((repr(f.default), repr(f.default_factory), str(f.type)))
        assert {name: d for name, d in declared.items() if len(d) > 1} == {}
