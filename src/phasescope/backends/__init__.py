"""Model backends (registry): a model spec's prefix picks the module that loads it.

    runs/s4          a phasescope model directory (`phasescope train` output)
    hf:DIR           a local transformers causal LM directory
    openai:URL#MODEL an OpenAI-compatible completions server (vLLM), with --tokenizer

Each entry names a module with ``PREFIX``, ``SUMMARY``, ``EXAMPLE``, ``Options`` (a
``backends.options.BackendOptions`` dataclass: its own load options, `phasescope sweep`'s Model
options; another backend's option given to it is refused) and ``load(spec, options) -> Backend``.
The module imports no model library at its top (torch loads in ``load``), so the command line
reads every backend's options cheaply. A new backend: one module and one line here
(CONTRIBUTING.md). In Python, ``phasescope.sweep`` also takes a ``Decoder`` (the phasescope
backend's options), a transformers ``PreTrainedModel`` (hf's) or any callable ``input_ids ->
logits`` (``CallableOptions``: a tokenizer only) (``resolve_model``).
"""

from __future__ import annotations

import importlib
import re
from dataclasses import fields
from pathlib import Path
from types import ModuleType

from phasescope.backends.options import BackendOptions, CallableOptions
from phasescope.backends.text_demo import ensure_built
from phasescope.errors import InputError
from phasescope.options import declared_in, drop, unused_flags
from phasescope.shipped import expand

BACKENDS: dict[str, str] = {
    "hf": "phasescope.backends.hf",
    "openai": "phasescope.backends.served",
    "phasescope": "phasescope.backends.native",  # a bare path: tried last
}


def kind(name: str) -> ModuleType:
    """The module of a registered backend."""
    return importlib.import_module(BACKENDS[name])


def spec_kind(spec: str) -> str:
    """The registered backend a model spec names (by its prefix; a bare path: ``phasescope``;
    ``demo:NAME``: the shipped model's)."""
    spec = expand(spec)
    for name in BACKENDS:
        if kind(name).PREFIX and spec.startswith(kind(name).PREFIX):
            return name
    prefix = re.match(r"([A-Za-z][A-Za-z0-9+.-]*):", spec)
    if prefix and len(prefix.group(1)) > 1:  # "C:" stays a path on Windows
        known = ", ".join(f"{kind(n).PREFIX}..." for n in BACKENDS if kind(n).PREFIX)
        raise InputError(
            f"model spec {spec!r}: unknown prefix {prefix.group(0)!r}; known: {known}, or a phasescope model "
            "directory (see `phasescope backends`)"
        )
    return "phasescope"


def model_kind(model) -> str:
    """The backend whose options ``model`` takes: a spec string's, ``phasescope`` for a Decoder,
    ``hf`` for a transformers model, ``python`` for any other callable (checked on loading)."""
    if isinstance(model, (str, Path)):
        return spec_kind(str(model))
    from phasescope.model.decoder import Decoder  # an in-memory model: torch is loaded already

    if isinstance(model, Decoder):
        return "phasescope"
    if hasattr(model, "config") and hasattr(model, "generate") and callable(model):
        return "hf"
    return "python"


def options_class(name: str) -> type[BackendOptions]:
    """The ``Options`` of backend ``name`` (``python``: a bare callable's)."""
    return CallableOptions if name == "python" else kind(name).Options


def declared_options() -> dict:
    """Every backend's options by name (one declaration for a name several backends share)."""
    return declared_in([options_class(name) for name in BACKENDS] + [CallableOptions])


def backend_options(name: str, given: dict, base: BackendOptions | None = None) -> BackendOptions:
    """Backend ``name``'s options from ``given`` (option name -> value) over ``base``; an option
    it does not read is refused unless it holds that option's default (the command line passes
    every option), named by the flag that set it."""
    cls = options_class(name)
    if base is not None and not isinstance(base, cls):
        raise InputError(
            f"{cls.__module__}.Options are the options of {described(name)}; got {type(base).__module__}.Options"
        )
    unused = unused_flags(cls, given, declared_options())
    if unused:
        raise InputError(f"{unused}: not an option of {described(name)}; {drop(unused)}")
    own = {f.name for f in fields(cls)}
    kept = {f.name: getattr(base, f.name) for f in fields(cls)} if base is not None else {}
    return cls(**kept | {n: v for n, v in given.items() if n in own})


def described(name: str) -> str:
    """Backend ``name``'s models, in the plural ("hf: models")."""
    if name == "python":
        return "Python callables (they load nothing: only a tokenizer applies)"
    module = kind(name)
    return f"{module.PREFIX} models" if module.PREFIX else "phasescope model directories"


def load_spec(spec: str, options: BackendOptions | None = None):
    """Load the model a spec names, with the backend its prefix picks (``options``: that
    backend's ``Options``; None: its defaults)."""
    spec = expand(spec)
    ensure_built(spec)
    name = spec_kind(spec)
    return kind(name).load(spec, backend_options(name, {}, options))


def resolve_model(model, options: BackendOptions | None = None):
    """A backend for: a spec string (see `phasescope backends`), a phasescope ``Decoder``, a
    transformers ``PreTrainedModel``, or any callable ``input_ids -> logits``."""
    from phasescope.backends.base import Backend

    if isinstance(model, Backend):
        return model
    if isinstance(model, (str, Path)):
        return load_spec(str(model), options)
    if not callable(model):  # a Decoder and a transformers model are callable too
        raise InputError(
            f"model must be a spec string, a Decoder, a transformers model or a callable input_ids -> logits; "
            f"got {type(model)}"
        )
    name = model_kind(model)
    options = backend_options(name, {}, options)  # the kind's options, another kind's refused
    if name == "phasescope":
        from phasescope.backends.native_model import from_decoder

        return from_decoder(model, description="in-memory phasescope Decoder", options=options)
    if name == "hf":
        from phasescope.backends.hf_model import from_pretrained_model

        return from_pretrained_model(model, options)
    from phasescope.backends.logits import from_callable

    return from_callable(model)


def __getattr__(name: str):
    """``from_callable`` and ``LogitsBackend`` without importing torch at package import."""
    if name in ("from_callable", "LogitsBackend"):
        from phasescope.backends import logits

        return getattr(logits, name)
    if name in ("Backend", "ModelInfo"):
        from phasescope.backends import base

        return getattr(base, name)
    raise AttributeError(f"module 'phasescope.backends' has no attribute {name!r}")


__all__ = [
    "BACKENDS",
    "BackendOptions",
    "backend_options",
    "declared_options",
    "kind",
    "load_spec",
    "model_kind",
    "options_class",
    "resolve_model",
]
