"""Shared checks for typed configs read from JSON or dicts: every config file is parsed by its
dataclass through ``build``, which refuses what the dataclass would not say clearly."""

from __future__ import annotations

import math
from dataclasses import MISSING, fields

from phasescope.errors import InputError


def reject_unknown_keys(cls, data: dict, what: str) -> None:
    """InputError naming unknown keys and the known ones (configs never ignore a key silently)."""
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise InputError(f"{what}: unknown keys {unknown}; known keys: {sorted(known)}")


def is_finite_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


_TYPES = {
    "int": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "float": (is_finite_number, "a finite number"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "str": (lambda v: isinstance(v, str), "text"),
    "tuple[int, ...]": (
        lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, int) and not isinstance(x, bool) for x in v),
        "a list of integers",
    ),
}


def build(cls, data, what: str, **converted):
    """``cls(**data)`` for a config read from a file: an object, known keys, the required ones
    present, plain fields of the annotated type (``converted``: nested values already built)."""
    if not isinstance(data, dict):
        raise InputError(f"{what}: expected a JSON object, got {type(data).__name__}")
    reject_unknown_keys(cls, data, what)
    required = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]
    missing = [name for name in required if name not in data]
    if missing:
        raise InputError(f"{what}: missing keys {missing}")
    for f in fields(cls):
        if f.name in data and f.name not in converted and f.type in _TYPES:
            ok, expected = _TYPES[f.type]
            if not ok(data[f.name]):
                raise InputError(f"{what}: {f.name} must be {expected}, got {data[f.name]!r}")
    return cls(**{**data, **converted})
