"""Phase-aware probes (registry): token-exact items at every offset.

Each entry names a module with ``SUMMARY``, ``OPTIONS`` (the `phasescope sweep` probe options
it reads; any other one given is refused), optionally ``ARGUMENT`` (the probe is named
``NAME:ARGUMENT``, e.g. ``prompts:FILE.jsonl``) and ``build(ctx: ProbeContext) -> Probe``. A new
probe: one module and one line here (CONTRIBUTING.md); tests/test_probe_registry.py runs every
registered probe.
"""

from __future__ import annotations

import importlib
from dataclasses import fields
from types import ModuleType

from phasescope.probes.base import Probe, ProbeContext, ProbeError, ProbeItem
from phasescope.probes.kv_retrieval import KVRetrievalProbe, KVRetrievalSpec
from phasescope.probes.padding_completion import CompletionSpec, PaddingCompletionProbe
from phasescope.specs import ProbeSpec

PROBES: dict[str, str] = {
    "kv-retrieval": "phasescope.probes.kv_retrieval",
    "padding-completion": "phasescope.probes.padding_completion",
    "prompts": "phasescope.probes.prompts",
    "lm-eval": "phasescope.probes.lm_eval_tasks",
}


def probe_module(spec: ProbeSpec) -> ModuleType:
    """The registered module of ``spec.name`` (``NAME`` or ``NAME:ARGUMENT``)."""
    if spec.kind not in PROBES:
        known = ", ".join(f"{name}:{m.ARGUMENT}" if hasattr(m, "ARGUMENT") else name for name, m in modules())
        raise ProbeError(f"unknown probe {spec.name!r}; known: {known}")
    module = importlib.import_module(PROBES[spec.kind])
    wants = getattr(module, "ARGUMENT", None)
    if bool(wants) != (spec.argument is not None) or (wants and not spec.argument):
        form = f"{spec.kind}:{wants}" if wants else spec.kind
        raise ProbeError(f"--probe {spec.name!r}: the {spec.kind} probe is named {form}")
    return module


def modules() -> list[tuple[str, ModuleType]]:
    return [(name, importlib.import_module(path)) for name, path in PROBES.items()]


def build_probe(ctx: ProbeContext) -> Probe:
    """The probe ``ctx.spec`` names, built by its module; options it does not read are refused
    (they would be recorded in the command but change nothing)."""
    module = probe_module(ctx.spec)
    default = ProbeSpec()
    unused = [
        f.name
        for f in fields(ProbeSpec)
        if f.name != "name" and f.name not in module.OPTIONS and getattr(ctx.spec, f.name) != getattr(default, f.name)
    ]
    if unused:
        flags = ", ".join(ProbeSpec.flag(name, getattr(ctx.spec, name)) for name in unused)
        raise ProbeError(f"{flags}: not used by the {ctx.spec.kind} probe; drop {'it' if len(unused) == 1 else 'them'}")
    probe = module.build(ctx)
    if not ctx.spec.chat_template:
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
    "probe_module",
]
