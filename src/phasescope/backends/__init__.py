"""Model backends (registry): a model spec's prefix picks the backend that loads it.

    runs/s4          a phasescope model directory (`phasescope train` output)
    hf:DIR           a local transformers causal LM directory
    openai:URL#MODEL an OpenAI-compatible completions server (vLLM), with --tokenizer DIR

In Python, ``phasescope.sweep`` also takes a ``Decoder``, a transformers ``PreTrainedModel`` or
any callable ``input_ids -> logits`` (``phasescope.api.resolve_model``).
"""

from __future__ import annotations

import re

from phasescope.backends.base import Backend, BackendOptions, LoadedModel
from phasescope.backends.hf import HFBackend
from phasescope.backends.native import NativeBackend, from_callable, load_native
from phasescope.backends.served import ServedBackend
from phasescope.errors import InputError

BACKENDS: dict[str, Backend] = {b.name: b for b in (HFBackend(), ServedBackend(), NativeBackend())}


def load_spec(spec: str, options: BackendOptions | None = None) -> LoadedModel:
    """Load the model a spec names, with the backend its prefix picks."""
    options = options or BackendOptions()
    prefix = re.match(r"([A-Za-z][A-Za-z0-9+.-]*):", spec)
    for backend in BACKENDS.values():
        if backend.prefix and spec.startswith(backend.prefix):
            return backend.load(spec, options)
    if prefix and len(prefix.group(1)) > 1:  # "C:" stays a path on Windows
        known = ", ".join(f"{b.prefix}..." for b in BACKENDS.values() if b.prefix)
        raise InputError(
            f"model spec {spec!r}: unknown prefix {prefix.group(0)!r}; known: {known}, or a phasescope model "
            "directory (see `phasescope backends`)"
        )
    return BACKENDS["phasescope"].load(spec, options)


__all__ = ["BACKENDS", "BackendOptions", "LoadedModel", "from_callable", "load_native", "load_spec"]
