"""Phase-aware probes (registry): token-exact items at every offset.

Each entry names a module with ``SUMMARY``, ``Options`` (a ``probes.options.ProbeOptions``
dataclass: its own `phasescope sweep` options; an option of another probe given to it is
refused), optionally ``ARGUMENT`` (the probe is named ``NAME:ARGUMENT``, e.g.
``prompts:FILE.jsonl``) and ``INPUTS`` (what it is built from: ``"text"``, the default, needs a
tokenizer; ``"ids"``, a native model's own task), and ``build(ctx: ProbeContext) -> Probe``. A new probe: one module and
one line here (CONTRIBUTING.md); tests/test_probe_registry.py runs every registered probe.
"""

from __future__ import annotations

import importlib
from dataclasses import Field, fields, replace
from types import ModuleType

from phasescope.options import declared_in, drop, unused_flags
from phasescope.probes.base import Probe, ProbeContext, ProbeError, ProbeItem
from phasescope.probes.kv_retrieval import KVRetrievalProbe, KVRetrievalSpec
from phasescope.probes.options import NoOptions, ProbeOptions
from phasescope.probes.padding_completion import CompletionSpec, PaddingCompletionProbe
from phasescope.specs import ProbeSpec

PROBES: dict[str, str] = {
    "kv-retrieval": "phasescope.probes.kv_retrieval",
    "padding-completion": "phasescope.probes.padding_completion",
    "prompts": "phasescope.probes.prompts",
    "lm-eval": "phasescope.probes.lm_eval_tasks",
}


def probe_module(name: str | ProbeSpec) -> ModuleType:
    """The registered module of probe ``name`` (``NAME`` or ``NAME:ARGUMENT``)."""
    spec = name if isinstance(name, ProbeSpec) else ProbeSpec(name)
    if spec.kind not in PROBES:
        known = ", ".join(probe_forms())
        raise ProbeError(f"unknown probe {spec.name!r}; known: {known}")
    module = importlib.import_module(PROBES[spec.kind])
    wants = getattr(module, "ARGUMENT", None)
    if bool(wants) != (spec.argument is not None) or (wants and not spec.argument):
        form = f"{spec.kind}:{wants}" if wants else spec.kind
        raise ProbeError(f"--probe {spec.name!r}: the {spec.kind} probe is named {form}")
    return module


def probe_forms() -> list[str]:
    """How each registered probe is named on the command line (``NAME`` or ``NAME:ARGUMENT``)."""
    return [f"{n}:{m.ARGUMENT}" if hasattr(m, "ARGUMENT") else n for n, m in modules()]


def modules() -> list[tuple[str, ModuleType]]:
    return [(name, importlib.import_module(path)) for name, path in PROBES.items()]


def inputs(module: ModuleType) -> tuple[str, ...]:
    """What a probe module is built from: ``"text"`` (a tokenizer) and/or ``"ids"`` (a native task)."""
    return getattr(module, "INPUTS", ("text",))


def options_class(module: ModuleType) -> type[ProbeOptions]:
    return getattr(module, "Options", NoOptions)


def declared_options() -> dict[str, Field]:
    """Every probe option by name (the first declaration of a name shared by several probes)."""
    return declared_in(options_class(module) for _, module in modules())


def probe_spec(name: str, given: dict) -> ProbeSpec:
    """The probe ``name`` with its options from ``given`` (option name -> value); an option the
    probe does not read is refused unless it holds that option's default (the command line passes
    every option), named by the flag that set it."""
    cls = options_class(probe_module(name))
    unused = unused_flags(cls, given, declared_options())
    if unused:
        raise ProbeError(f"{unused}: not used by the {ProbeSpec(name).kind} probe; {drop(unused)}")
    own = {f.name for f in fields(cls)}
    return ProbeSpec(name, cls(**{n: v for n, v in given.items() if n in own}))


def build_probe(ctx: ProbeContext) -> Probe:
    """The probe ``ctx.spec`` names, built by its module (a spec without options gets the
    probe's defaults)."""
    module = probe_module(ctx.spec)
    if ctx.spec.options is None:
        ctx = replace(ctx, spec=ProbeSpec(ctx.spec.name, options_class(module)()))
    elif not isinstance(ctx.spec.options, options_class(module)):
        raise ProbeError(f"the {ctx.spec.kind} probe takes {options_class(module).__name__} options")
    probe = module.build(ctx)
    if not ctx.spec.get("chat_template", False):
        return probe
    from phasescope.probes.chat import ChatTemplated

    if isinstance(probe, KVRetrievalProbe):
        raise ProbeError("--chat-template needs a probe written in text (a model with a tokenizer)")
    return ChatTemplated(probe, ctx.tokenizer)


__all__ = [
    "PROBES",
    "CompletionSpec",
    "KVRetrievalProbe",
    "KVRetrievalSpec",
    "PaddingCompletionProbe",
    "Probe",
    "ProbeContext",
    "ProbeError",
    "ProbeItem",
    "build_probe",
    "declared_options",
    "probe_module",
    "probe_spec",
]
