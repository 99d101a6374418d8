"""Model backends (registry): a model spec's prefix picks the module that loads it.

    runs/s4          a phasescope model directory (`phasescope train` output)
    hf:DIR           a local transformers causal LM directory
    openai:URL#MODEL an OpenAI-compatible completions server (vLLM), with --tokenizer

Each entry names a module with ``PREFIX``, ``SUMMARY``, ``EXAMPLE`` and ``load(spec, options)
-> Backend``; it is imported only when its spec is loaded (or `phasescope backends` lists it),
so ``import phasescope`` stays cheap. A new backend: one module and one line here
(CONTRIBUTING.md). In Python, ``phasescope.sweep`` also takes a ``Decoder``, a transformers
``PreTrainedModel`` or any callable ``input_ids -> logits`` (``resolve_model``).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from types import ModuleType

from phasescope.errors import InputError
from phasescope.specs import BackendOptions

BACKENDS: dict[str, str] = {
    "hf": "phasescope.backends.hf",
    "openai": "phasescope.backends.served",
    "phasescope": "phasescope.backends.native",  # a bare path: tried last
}


def kind(name: str) -> ModuleType:
    """The module of a registered backend."""
    return importlib.import_module(BACKENDS[name])


def load_spec(spec: str, options: BackendOptions | None = None):
    """Load the model a spec names, with the backend its prefix picks."""
    options = options or BackendOptions()
    for name in BACKENDS:
        module = kind(name)
        if module.PREFIX and spec.startswith(module.PREFIX):
            return module.load(spec, options)
    prefix = re.match(r"([A-Za-z][A-Za-z0-9+.-]*):", spec)
    if prefix and len(prefix.group(1)) > 1:  # "C:" stays a path on Windows
        known = ", ".join(f"{kind(n).PREFIX}..." for n in BACKENDS if kind(n).PREFIX)
        raise InputError(
            f"model spec {spec!r}: unknown prefix {prefix.group(0)!r}; known: {known}, or a phasescope model "
            "directory (see `phasescope backends`)"
        )
    return kind("phasescope").load(spec, options)


def resolve_model(model, options: BackendOptions | None = None):
    """A backend for: a spec string (see `phasescope backends`), a phasescope ``Decoder``, a
    transformers ``PreTrainedModel``, or any callable ``input_ids -> logits``."""
    from phasescope.backends.base import Backend
    from phasescope.backends.logits import from_callable
    from phasescope.backends.native import from_decoder
    from phasescope.model.decoder import Decoder

    if isinstance(model, Backend):
        return model
    if isinstance(model, (str, Path)):
        return load_spec(str(model), options)
    if isinstance(model, Decoder):
        return from_decoder(model, description="in-memory phasescope Decoder", options=options)
    if hasattr(model, "config") and hasattr(model, "generate") and callable(model):
        from phasescope.backends.hf import from_pretrained_model

        return from_pretrained_model(model, options)
    if callable(model):
        return from_callable(model)
    raise InputError(
        f"model must be a spec string, a Decoder, a transformers model or a callable input_ids -> logits; "
        f"got {type(model)}"
    )


def __getattr__(name: str):
    """``from_callable`` and ``LogitsBackend`` without importing torch at package import."""
    if name in ("from_callable", "LogitsBackend"):
        from phasescope.backends import logits

        return getattr(logits, name)
    if name in ("Backend", "ModelInfo"):
        from phasescope.backends import base

        return getattr(base, name)
    raise AttributeError(f"module 'phasescope.backends' has no attribute {name!r}")


__all__ = ["BACKENDS", "BackendOptions", "kind", "load_spec", "resolve_model"]
