"""What decides whether a run directory resumes (#45 part 1): its spec.json upgraded and read back
as the typed ``SweepIdentity``, compared with this sweep's, and each kept record's prompt digest
against the prompt this sweep builds for it. The probe's description (spec.json's top-level
``probe``) is not compared."""

from __future__ import annotations

import importlib
import json
import re
from dataclasses import fields

import pytest
import torch

import phasescope
from phasescope.backends import BACKENDS
from phasescope.backends import options_class as backend_class
from phasescope.errors import ProbeError
from phasescope.probes import PROBES, options_class
from phasescope.specs import Geometry, ProbeSpec, SweepIdentity, SweepSpec

GEOMETRY = Geometry(4, 4, 0, 8, "test")


@pytest.mark.parametrize("probe", sorted(PROBES))
@pytest.mark.parametrize("backend", sorted(BACKENDS) + ["python"])
def test_an_identity_reads_back_as_itself_for_every_probe_and_backend(probe, backend):
    """to_json -> from_json is the identity for every registered probe's and backend's defaults,
    and an option that does not change what is measured (a device, a timeout) is not part of it."""
    module = importlib.import_module(PROBES[probe])
    probe_options, backend_options = options_class(module), backend_class(backend)
    name = f"{probe}:x" if hasattr(module, "ARGUMENT") else probe
    spec = SweepSpec("m", ProbeSpec(name, probe_options()), offsets=range(8), backend=backend_options())
    identity = SweepIdentity.of(spec, 4, GEOMETRY, 16)
    assert SweepIdentity.from_json(identity.to_json(), probe_options, backend_options) == identity
    other = {bool: lambda v: not v, str: lambda v: f"{v}-other", int: lambda v: v + 1, float: lambda v: v + 1}
    for f in (f for f in fields(backend_options) if not f.metadata.get("measured", True)):
        value = getattr(backend_options(), f.name)
        assert type(value) in other, f"{f.name}: teach this test another value of a {type(value).__name__}"
        changed = backend_options(**{f.name: other[type(value)](value)})
        again = SweepSpec("m", ProbeSpec(name, probe_options()), offsets=range(8), backend=changed)
        assert SweepIdentity.of(again, 4, GEOMETRY, 16) == identity, f.name
    assert SweepIdentity.of(spec, 4, GEOMETRY, 8) != identity  # the batch size is part of it


def uniform_model(vocab: int):
    def logits(ids):
        return torch.zeros(ids.shape[0], ids.shape[1], vocab)

    return logits


def test_an_edited_prompts_file_is_refused_on_resume_by_the_records_digests(tmp_path):
    """The prompts probe describes its file by path and count: before the digests, editing a
    prompt and rerunning resumed silently, keeping records scored on the old text beside new ones."""
    from phasescope.backends.tokenizers import named_tokenizer

    model = uniform_model(len(named_tokenizer("qwen3")))
    prompts = tmp_path / "prompts.jsonl"
    rows = [
        {"prompt": "Question: What is the capital of France?\nAnswer:", "candidates": [" Paris", " Lyon"], "target": 0},
        {"prompt": "Question: What is the capital of Italy?\nAnswer:", "candidates": [" Milan", " Rome"], "target": 1},
    ]
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = tmp_path / "run"
    common = dict(tokenizer="qwen3", step=4, local=0, offsets=range(8), out=run)
    first = phasescope.sweep(model, f"prompts:{prompts}", **common)
    assert len(first.records) == 16 and all(r.prompt_digest for r in first.records)
    again = phasescope.sweep(model, f"prompts:{prompts}", **common)
    assert again.scored == 0  # the same file: every record kept
    rows[1]["prompt"] = "Question: Which city is the capital of Italy?\nAnswer:"
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ProbeError, match=r"content 1, offset 0\) was scored on another prompt .*an edited prompts"):
        phasescope.sweep(model, f"prompts:{prompts}", **common)


def test_the_probes_description_does_not_decide_and_an_undeclared_option_does(tmp_path):
    """Edits to spec.json's top-level ``probe`` (a description: a parameter renamed, added or
    changed there) leave the run resumable; an option in the typed sweep that the probe does not
    declare, or a value that differs, is refused by name."""
    from phasescope.train.shipped import DEMO

    model, run = str(DEMO / "tiny-s4"), tmp_path / "run"
    common = dict(samples=2, offsets=range(8), out=run)
    first = phasescope.sweep(model, **common)
    spec = json.loads((run / "spec.json").read_text())
    spec["probe"] |= {"min_gap": 99, "lures": 5, "task": "described otherwise"}
    (run / "spec.json").write_text(json.dumps(spec))
    again = phasescope.sweep(model, **common)
    assert again.scored == 0 and len(again.records) == len(first.records)
    for key, value, said in (
        ("lures", 2, r"sweep\.probe\.lures: 2 in the run, null now"),
        ("depth", 0.25, r"sweep\.probe\.depth: 0\.25 in the run, 0\.5 now"),
    ):
        edited = json.loads(json.dumps(spec))
        edited["sweep"]["probe"][key] = value
        (run / "spec.json").write_text(json.dumps(edited))
        with pytest.raises(ProbeError, match=r"holds a different sweep \(" + said):
            phasescope.sweep(model, **common)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    from phasescope.train.shipped import DEMO

    run = tmp_path_factory.mktemp("identity") / "run"
    phasescope.sweep(str(DEMO / "tiny-s4"), samples=2, offsets=range(8), out=run)
    return run


@pytest.mark.parametrize(
    ("where", "value", "said"),
    [
        (("sweep", "probe"), "x", 'sweep.probe: "x" in the run'),
        (("sweep",), [], "sweep: [] in the run"),
        (("sweep", "backend"), None, "sweep.backend: null in the run"),
        (("sweep", "seed"), "0", 'sweep.seed: "0" in the run, 0 now'),
        (("sweep", "probe", "depth"), "half", 'sweep.probe.depth: "half" in the run, 0.5 now'),
        (("sweep", "remedies"), [1], "sweep.remedies: [1] in the run"),
        (("samples",), "2", 'samples: "2" in the run, 2 now'),
    ],
)
def test_a_damaged_spec_json_is_refused_naming_the_field_never_a_crash(small_run, tmp_path, where, value, said):
    """A section of the wrong shape cannot be read back as the typed sweep: the resume is refused
    with the field's two values (a section that is not an object was read as schema 1's, and resumed)."""
    import shutil

    from phasescope.train.shipped import DEMO

    run = tmp_path / "run"
    shutil.copytree(small_run, run)
    spec = json.loads((run / "spec.json").read_text())
    section = spec
    for key in where[:-1]:
        section = section[key]
    section[where[-1]] = value
    (run / "spec.json").write_text(json.dumps(spec))
    with pytest.raises(ProbeError, match=re.escape(f"holds a different sweep ({said}")):
        phasescope.sweep(str(DEMO / "tiny-s4"), samples=2, offsets=range(8), out=run)
