"""A sweep assembled from its typed spec, for the command line and ``phasescope.sweep`` alike:
``assemble(spec)`` loads the model, resolves the geometry and builds the probe (the slow start,
before anything is scored); ``run_assembled`` scores it. The spec is made in one place too
(``run.settings.sweep_settings``), so both callers read, check and build a sweep the same way::

    options (command line / Python keywords) -> sweep_settings -> SweepSpec, RunOptions
    SweepSpec -> assemble -> Prepared (backend, probe, geometry) -> run_assembled -> records
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace

from phasescope.backends import resolve_model
from phasescope.data.retrieval import RetrievalTask
from phasescope.errors import InputError
from phasescope.specs import RunOptions, SweepSpec


@dataclass(frozen=True)
class Prepared:
    """A loaded model, the geometry it is measured with and the probe built for it."""

    backend: object
    probe: object
    geometry: object
    spec: SweepSpec  # the sweep, its probe's options filled in (what spec.json and the command record)


def assemble(spec: SweepSpec, model=None, **inputs) -> Prepared:
    """Load the model, resolve the geometry and build the probe: the slow start of a sweep, before
    anything is scored (the command line shows a spinner over it)."""
    from phasescope.backends import backend_options, model_kind
    from phasescope.probes import probe_spec
    from phasescope.specs import Geometry

    model = model if model is not None else spec.model
    if model is None:
        raise InputError(
            "model is None; pass a spec string (runs/s4, hf:DIR, openai:URL#MODEL, demo:tiny-s4), a Decoder, a "
            "transformers model or a callable input_ids -> logits"
        )
    task = inputs.get("task")
    if task is not None and not isinstance(task, RetrievalTask):
        raise InputError(
            f"task must be a RetrievalTask (phasescope.data.retrieval), got {task!r}; it is what a callable's "
            "kv-retrieval items are built from"
        )
    if spec.probe.options is None:  # a SweepSpec built by hand: the probe's default options
        spec = replace(spec, probe=probe_spec(spec.probe.name, {}))
    if spec.backend is None:  # ... and the backend's
        spec = replace(spec, backend=backend_options(model_kind(model), {}))
    backend = resolve_model(model, spec.backend)
    if backend.info.callable_only and backend.info.vocab_size is None and task is not None:
        backend.info.vocab_size = task.vocab_size  # its logits must cover the task's ids (checked on each call)
    geometry = Geometry.resolve(backend.info.geometry, spec.geometry, backend.info.description or "the model")
    if geometry.local is None and backend.info.callable_only:
        warnings.warn(_UNKNOWN_RAW_WINDOW, stacklevel=4)
    backend = _with_remedies(backend, spec, geometry, inputs)
    return Prepared(backend, _probe(spec, backend, geometry, inputs), geometry, spec)


def run_assembled(prepared: Prepared, run: RunOptions, command: str | None = None, say=None):
    """Score the prepared sweep (``run_sweep``): resumable, with a progress bar when asked;
    ``say``: where to tell what a resumed run continues from (the command line prints it)."""
    from phasescope.run.orchestrator import run_sweep

    spec = prepared.spec.with_offsets_for(prepared.geometry.step)
    command = command or spec.command(run)
    result = run_sweep(prepared.backend, prepared.probe, spec, run, prepared.geometry, command, say or (lambda _: None))
    if result.plan is not None:  # the dry run also says whether these offsets can test the gap and the period
        from phasescope.analysis.design import design_check  # scipy.stats: 1 s a sweep need not wait for

        result.plan["design"] = design_check(spec.offsets, prepared.geometry.step)
    return result


_UNKNOWN_RAW_WINDOW = (
    "the model's raw window L is unknown (pass local=L): the needle is not kept beyond it, so it may sit in "
    "the raw window, where compression does not act"
)


def _with_remedies(backend, spec: SweepSpec, geometry, inputs: dict):
    if not spec.remedies.phase_ensemble:
        return backend
    from phasescope.run.ensemble import pad_token, phase_ensemble

    pad_id = spec.remedies.ensemble_pad_id
    pad_id = pad_id if pad_id is not None else pad_token(backend, inputs["tokenizer"], inputs["task"])
    return phase_ensemble(backend, geometry.step, pad_id)


def _probe(spec: SweepSpec, backend, geometry, inputs: dict):
    """The probe, built by its registry entry from the model's tokenizer and task."""
    from phasescope.probes import build_probe
    from phasescope.probes.base import ProbeContext

    info = backend.info
    tokenizer = inputs["tokenizer"] or info.tokenizer
    named = getattr(spec.backend, "tokenizer", None)
    if tokenizer is None and named:  # a callable brings none: the one named (a directory or name)
        from phasescope.backends.base import load_tokenizer

        tokenizer = load_tokenizer(named)
    bos_id = info.bos_id if info.bos_id is not None else getattr(tokenizer, "bos_token_id", None)
    task = inputs["task"] or (RetrievalTask.from_dict(info.task) if info.task else None)
    ctx = ProbeContext(
        spec=spec.probe,
        geometry=geometry,
        tokenizer=tokenizer,
        bos_id=None if spec.probe.get("chat_template", False) else bos_id,  # the template brings its own start
        task=task,
        completion=inputs["completion"],
        model=info.description or "the model",
        max_len=info.max_len,
    )
    return build_probe(ctx)
