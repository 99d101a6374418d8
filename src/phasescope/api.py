"""The Python API: ``phasescope.sweep``, and ``analyze``, ``report`` and ``compare`` (from
``phasescope.results``, which never loads torch; this module loads it only in ``sweep``).

``sweep`` takes the sweep's options as keywords; ``sweep_spec`` takes them typed
(``phasescope.specs.SweepSpec`` + ``RunOptions``), as the command line does.
"""

from __future__ import annotations

from pathlib import Path

from phasescope.backends import resolve_model
from phasescope.errors import InputError
from phasescope.results import analyze, compare, compared_runs, current_metrics, paired, records_digest, report
from phasescope.specs import RunOptions, SweepSpec

__all__ = [
    "analyze",
    "compare",
    "compared_runs",
    "current_metrics",
    "paired",
    "records_digest",
    "report",
    "resolve_model",
    "sweep",
]


def sweep(model, probe: str = "kv-retrieval", *, task=None, tokenizer=None, completion=None, command=None, **options):
    """Score every content sample at every offset; with ``out``, a resumable run directory.

    ``model``: a spec string (``runs/s4``, ``hf:DIR``, ``openai:URL#MODEL``), a ``Decoder``, a
    transformers model or any callable ``input_ids [B,T] -> logits [B,T,V]``. ``options`` are
    `phasescope sweep`'s options by their Python names (``step``, ``offsets=range(24)``,
    ``samples``, ``design``, ``kv_gaps=(0, 1)``, ``out``, ``batch_size``, ``dry_run``, ...; the
    list: ``phasescope.run.settings.option_sections()``, what each means: ``phasescope sweep --help``,
    docs/sweeps.md); ``options=`` the backend's ``Options`` (e.g. ``phasescope.backends.hf.Options(dtype=
    "bfloat16")``) may stand for the model-loading ones.
    ``task`` (a RetrievalTask), ``tokenizer`` (an object) and ``completion`` (CompletionSpec or a
    list) are what the probe is built from when the model does not bring them. ``dry_run=True``
    returns the plan and writes nothing.
    """
    if model is None:
        raise InputError(
            "model is None; pass a spec string (runs/s4, hf:DIR, openai:URL#MODEL, demo:tiny-s4), a Decoder, a "
            "transformers model or a callable input_ids -> logits"
        )
    if "options" in options:  # the model-loading options as one backend Options object
        options["backend"] = options.pop("options")
    if isinstance(tokenizer, (str, Path)):  # a tokenizer directory or name: how the model loads, not an object
        options["tokenizer"], tokenizer = str(tokenizer), None
    from phasescope.backends import model_kind
    from phasescope.run.settings import sweep_settings

    name = model if isinstance(model, str) else str(model) if isinstance(model, Path) else "python"
    explicit = set(options) - {"backend"}  # every keyword given here was given on purpose
    spec, run = sweep_settings(name, model_kind(model), explicit, probe=probe, **options)
    return sweep_spec(spec, run, model=model, command=command, task=task, tokenizer=tokenizer, completion=completion)


def sweep_spec(spec: SweepSpec, run: RunOptions, model=None, command: str | None = None, **inputs):
    """The sweep ``spec`` describes, run as ``run`` says; ``model`` (default: ``spec.model``)
    may be an in-memory model; ``inputs``: task, tokenizer, completion (see ``sweep``)."""
    from phasescope.assemble import assemble, run_assembled

    return run_assembled(assemble(spec, model, **inputs), run, command)
